-- Workspace snapshots in the S3-compatible store (docs/SNAPSHOTS.md,
-- src/app/snapshots/). A row per snapshot taken or tried; the object is
-- deleted before its row (retention), so a row whose delete failed stays for
-- the next pass. Deleting a chat keeps its snapshots (session_id is not a
-- foreign key) until retention removes them, as downloads are kept.
CREATE TABLE snapshots (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    session_id uuid NOT NULL,
    key text NOT NULL,                 -- the archive's object key
    manifest_key text NOT NULL,        -- the manifest beside it
    bytes bigint NOT NULL DEFAULT 0,
    sha256 text NOT NULL DEFAULT '',
    files integer NOT NULL DEFAULT 0,
    digest text NOT NULL DEFAULT '',   -- of the tree: sorted (path, size, mtime)
    status text NOT NULL CHECK (status IN ('ready', 'failed')),
    error text,                        -- the store's code and message when failed
    trigger text NOT NULL DEFAULT 'api',
    delete_error text,                 -- the last failed delete of the object
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX snapshots_session ON snapshots (session_id, created_at DESC);
