-- Files the user downloaded from a sandbox, stored by the server: they survive
-- deleting the chat (no foreign key to it) and reaping the sandbox, and every
-- instance can serve them.
CREATE TABLE downloads (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    session_id uuid,                 -- where it came from (informational)
    path text NOT NULL,              -- the path in the sandbox
    name text NOT NULL,              -- file name offered to the browser
    content_type text NOT NULL,
    size bigint NOT NULL,
    sha256 text NOT NULL,
    data bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX downloads_user ON downloads (user_id, created_at DESC);
