-- Utopia, part 1: documents, their chunks (full-text and fuzzy search) and the
-- per-user vocabulary that typo-tolerant search looks words up in.
-- See docs/UTOPIA.md for why the trigram index is on the vocabulary and not on
-- the chunk bodies.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS btree_gin; -- trusted: the database owner may create it

CREATE TABLE utopia_documents (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    chat_id uuid,                    -- NULL: the user's library, visible in every chat
    title text NOT NULL,
    source text NOT NULL,            -- 'upload', 'agent', a URL, ...
    mime text NOT NULL,
    bytes bigint NOT NULL,           -- size of what was uploaded
    chars bigint NOT NULL,           -- size of the extracted text
    nchunks int NOT NULL,
    fts_config regconfig NOT NULL,   -- the text search configuration of its chunks
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX utopia_documents_user ON utopia_documents (user_id, created_at DESC);

CREATE TABLE utopia_chunks (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    document_id uuid NOT NULL REFERENCES utopia_documents(id) ON DELETE CASCADE,
    user_id uuid NOT NULL,           -- copied from the document: scoped scans need no join
    chat_id uuid,
    position int NOT NULL,           -- 0, 1, ... in document order
    heading text NOT NULL,           -- "Title > Section > Subsection"
    body text NOT NULL,
    tsv tsvector NOT NULL,           -- to_tsvector(document's fts_config, heading || body)
    embedding real[],                -- unit vector, when an embeddings model is configured
    UNIQUE (document_id, position)
);
CREATE INDEX utopia_chunks_tsv ON utopia_chunks USING gin (tsv);
CREATE INDEX utopia_chunks_user ON utopia_chunks (user_id, chat_id);

-- Every distinct word (the 'simple' configuration's lexemes) of a user's chunks,
-- with the number of chunks holding it. Typos are corrected against it by
-- trigram similarity; ndocs gives the word's rarity.
CREATE TABLE utopia_terms (
    user_id uuid NOT NULL,
    term text NOT NULL,
    ndocs int NOT NULL,
    PRIMARY KEY (user_id, term)
);
CREATE INDEX utopia_terms_trgm ON utopia_terms USING gin (user_id, term gin_trgm_ops);
