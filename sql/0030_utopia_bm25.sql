-- Utopia: the corpus statistics BM25 ranks chunks with (docs/UTOPIA.md
-- "Ranking"), kept exact by triggers on utopia_chunks in the transaction that
-- adds, deletes or re-indexes chunks, whatever the path (a document's delete,
-- a user's delete cascading to its documents, an UPDATE of tsv).
--
-- A scope is a user's chunks of one chat, or of the library (chat_id NULL,
-- kept here as the nil UUID): a search of one chat reads its scope's row, a
-- search of everything the sum of the user's rows.
--
-- locks: utopia_chunks
-- (the existing chunks are counted once under a SHARE lock: documents being
-- added wait until the migration commits)
CREATE TABLE utopia_bm25_scopes (
    user_id uuid NOT NULL,
    chat_id uuid NOT NULL,           -- the nil UUID: the user's library
    nchunks bigint NOT NULL,         -- chunks in the scope
    total_len bigint NOT NULL,       -- sum of their lengths (length(tsv): distinct lexemes)
    PRIMARY KEY (user_id, chat_id)
);
-- each lexeme of the scope's tsvectors with the number of chunks holding it;
-- (user_id, term) first: a search of everything sums a term over the scopes
CREATE TABLE utopia_bm25_terms (
    user_id uuid NOT NULL,
    term text NOT NULL,
    chat_id uuid NOT NULL,
    df int NOT NULL,
    PRIMARY KEY (user_id, term, chat_id)
);

-- The change a statement made to utopia_chunks, added to the statistics: +1
-- for each new chunk, -1 for each old one (an UPDATE is both). Keys are locked
-- in order (the scope rows first, then the terms by name), so concurrent
-- writers of one scope queue on its row and never deadlock; rows that reach
-- zero are removed.
CREATE FUNCTION utopia_bm25_count() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    src text := CASE TG_OP
        WHEN 'INSERT' THEN 'SELECT user_id, chat_id, tsv, 1 AS s FROM bm25_new'
        WHEN 'DELETE' THEN 'SELECT user_id, chat_id, tsv, -1 AS s FROM bm25_old'
        ELSE 'SELECT user_id, chat_id, tsv, 1 AS s FROM bm25_new UNION ALL '
             'SELECT user_id, chat_id, tsv, -1 FROM bm25_old' END;
    us uuid[];
    cs uuid[];
    ts text[];
BEGIN
    -- (the rows that reach zero are deleted by a second statement: a DELETE
    -- beside the INSERT in one statement would not see the rows it updated)
    EXECUTE format($q$
        WITH d AS (%s), up AS (
            INSERT INTO utopia_bm25_scopes AS x (user_id, chat_id, nchunks, total_len)
            SELECT user_id, coalesce(chat_id, '00000000-0000-0000-0000-000000000000'), sum(s),
                   sum(s * length(tsv)) FROM d GROUP BY 1, 2 HAVING sum(s) <> 0 OR
                   sum(s * length(tsv)) <> 0 ORDER BY 1, 2
            ON CONFLICT (user_id, chat_id) DO UPDATE SET nchunks = x.nchunks + EXCLUDED.nchunks,
                total_len = x.total_len + EXCLUDED.total_len
            RETURNING x.user_id, x.chat_id, x.nchunks)
        SELECT array_agg(user_id), array_agg(chat_id) FROM up WHERE nchunks <= 0$q$, src)
        INTO us, cs;
    IF us IS NOT NULL THEN
        DELETE FROM utopia_bm25_scopes x USING unnest(us, cs) z(u, c)
            WHERE x.user_id = z.u AND x.chat_id = z.c AND x.nchunks <= 0;
    END IF;
    EXECUTE format($q$
        WITH d AS (%s), up AS (
            INSERT INTO utopia_bm25_terms AS x (user_id, term, chat_id, df)
            SELECT d.user_id, t, coalesce(d.chat_id, '00000000-0000-0000-0000-000000000000'),
                   sum(d.s) FROM d, unnest(tsvector_to_array(d.tsv)) t GROUP BY 1, 2, 3
                   HAVING sum(d.s) <> 0 ORDER BY 1, 2, 3
            ON CONFLICT (user_id, term, chat_id) DO UPDATE SET df = x.df + EXCLUDED.df
            RETURNING x.user_id, x.term, x.chat_id, x.df)
        SELECT array_agg(user_id), array_agg(term), array_agg(chat_id) FROM up
        WHERE df <= 0$q$, src) INTO us, ts, cs;
    IF us IS NOT NULL THEN
        DELETE FROM utopia_bm25_terms x USING unnest(us, ts, cs) z(u, t, c)
            WHERE x.user_id = z.u AND x.term = z.t AND x.chat_id = z.c AND x.df <= 0;
    END IF;
    RETURN NULL;
END $fn$;

CREATE TRIGGER utopia_chunks_bm25_insert AFTER INSERT ON utopia_chunks
    REFERENCING NEW TABLE AS bm25_new FOR EACH STATEMENT EXECUTE FUNCTION utopia_bm25_count();
CREATE TRIGGER utopia_chunks_bm25_delete AFTER DELETE ON utopia_chunks
    REFERENCING OLD TABLE AS bm25_old FOR EACH STATEMENT EXECUTE FUNCTION utopia_bm25_count();
CREATE TRIGGER utopia_chunks_bm25_update AFTER UPDATE ON utopia_chunks
    REFERENCING OLD TABLE AS bm25_old NEW TABLE AS bm25_new FOR EACH STATEMENT
    EXECUTE FUNCTION utopia_bm25_count();

-- the chunks there are now
LOCK TABLE utopia_chunks IN SHARE MODE;
INSERT INTO utopia_bm25_scopes (user_id, chat_id, nchunks, total_len)
SELECT user_id, coalesce(chat_id, '00000000-0000-0000-0000-000000000000'), count(*),
       sum(length(tsv)) FROM utopia_chunks GROUP BY 1, 2;
INSERT INTO utopia_bm25_terms (user_id, term, chat_id, df)
SELECT c.user_id, t, coalesce(c.chat_id, '00000000-0000-0000-0000-000000000000'), count(*)
FROM utopia_chunks c, unnest(tsvector_to_array(c.tsv)) t GROUP BY 1, 2, 3;
ANALYZE utopia_bm25_scopes, utopia_bm25_terms;
