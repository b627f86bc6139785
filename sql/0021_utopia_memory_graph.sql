-- Utopia, part 2: long-term memories (notes) and the knowledge graph of
-- entities and dated facts. See docs/UTOPIA.md.

CREATE TABLE utopia_memories (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    chat_id uuid,                    -- where it was learned (no foreign key: chats may go)
    turn_id uuid,
    document_id uuid REFERENCES utopia_documents(id) ON DELETE SET NULL,
    text text NOT NULL,
    tsv tsvector NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX utopia_memories_user ON utopia_memories (user_id, created_at DESC);
CREATE INDEX utopia_memories_tsv ON utopia_memories USING gin (tsv);
CREATE INDEX utopia_memories_trgm ON utopia_memories USING gin (user_id, text gin_trgm_ops);

CREATE TABLE utopia_entities (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name text NOT NULL,              -- as first named
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Every name an entity is known by, normalised (lower case, single spaces):
-- a name means exactly one entity of a user.
CREATE TABLE utopia_aliases (
    user_id uuid NOT NULL,
    norm text NOT NULL,
    alias text NOT NULL,
    entity_id uuid NOT NULL REFERENCES utopia_entities(id) ON DELETE CASCADE,
    PRIMARY KEY (user_id, norm)
);
CREATE INDEX utopia_aliases_entity ON utopia_aliases (entity_id);
CREATE INDEX utopia_aliases_trgm ON utopia_aliases USING gin (user_id, norm gin_trgm_ops);

-- Cardinality of predicates a user's facts use: single-valued predicates (a
-- person lives in one place at a time) have a newer fact close the older one.
-- Built-in defaults live in kg.c; the first explicit declaration is kept here.
CREATE TABLE utopia_predicates (
    user_id uuid NOT NULL,
    name text NOT NULL,
    single boolean NOT NULL,
    PRIMARY KEY (user_id, name)
);

CREATE TABLE utopia_facts (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    subject_id uuid NOT NULL REFERENCES utopia_entities(id) ON DELETE CASCADE,
    predicate text NOT NULL,         -- normalised: lower_snake_case
    object_id uuid REFERENCES utopia_entities(id) ON DELETE CASCADE,
    object text NOT NULL,            -- the value, or the object entity's name as given
    valid_from timestamptz NOT NULL, -- '-infinity' when unknown
    valid_from_precision text NOT NULL, -- year, month, day, minute, second, recorded, unknown
    valid_to timestamptz,            -- NULL: still true
    valid_to_precision text,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    source_chat_id uuid,
    source_turn_id uuid,
    source_document_id uuid REFERENCES utopia_documents(id) ON DELETE CASCADE,
    closed_by uuid REFERENCES utopia_facts(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED,
    tsv tsvector NOT NULL,
    CHECK (valid_to IS NULL OR valid_to >= valid_from)
);
CREATE INDEX utopia_facts_sp ON utopia_facts (user_id, subject_id, predicate, valid_from);
CREATE INDEX utopia_facts_object ON utopia_facts (object_id);
CREATE INDEX utopia_facts_closed_by ON utopia_facts (closed_by);
CREATE INDEX utopia_facts_tsv ON utopia_facts USING gin (tsv);

-- Deleting a fact that closed another reopens that one up to where the deleted
-- one ended, so the timeline stays whole (also for cascades from documents).
CREATE FUNCTION utopia_fact_reopen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE utopia_facts
       SET valid_to = OLD.valid_to, valid_to_precision = OLD.valid_to_precision,
           closed_by = OLD.closed_by
     WHERE closed_by = OLD.id;
    RETURN OLD;
END $$;
CREATE TRIGGER utopia_fact_reopen BEFORE DELETE ON utopia_facts
    FOR EACH ROW EXECUTE FUNCTION utopia_fact_reopen();

-- A date at the precision it was given: '2024', '2024-03', '2024-03-05' or a
-- full UTC timestamp; NULL for an unknown start.
CREATE FUNCTION utopia_date_text(ts timestamptz, prec text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN ts IS NULL OR ts = '-infinity' THEN NULL
        WHEN prec = 'year' THEN to_char(ts AT TIME ZONE 'UTC', 'YYYY')
        WHEN prec = 'month' THEN to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM')
        WHEN prec IN ('day') THEN to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD')
        ELSE to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
    END $$;
