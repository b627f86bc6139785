-- bench/search/corpus.sql — a synthetic corpus of :n chunks for one user, made
-- in SQL (generate_series) for speed. psql -v n=100000 -v uid=... -f corpus.sql
-- Words: 4,000 common pseudo-words (Zipf-like picks, with English inflections
-- so stemming matters) and one unique name per chunk ("kelvorim123"-like,
-- made of syllables) that known-answer queries look for.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
BEGIN;
-- bulk load without the indexes, then build them once
DROP INDEX IF EXISTS utopia_chunks_tsv;
DROP INDEX IF EXISTS utopia_terms_prefix;
DROP INDEX IF EXISTS utopia_terms_suffix;
CREATE TEMP TABLE syl AS SELECT array['ka','lo','mi','ren','tor','va','sel','dun','pha','gri','mo','len','sta','qui','bre','zo','tan','fel','ori','umb','che','ast','ple','vin','dor','kes','mar','nul','pes','rig','sut','wel'] AS s;
CREATE TEMP TABLE vocab AS
  SELECT i, s[1 + i % 32] || s[1 + (i / 32) % 32] || CASE WHEN i >= 1024 THEN s[1 + (i / 1024) % 32] ELSE '' END AS w
  FROM syl, generate_series(0, 3999) i;
ANALYZE vocab;

INSERT INTO users (id, email) VALUES (:'uid', :'uid' || '@bench') ON CONFLICT DO NOTHING;
INSERT INTO utopia_documents (id, user_id, title, source, mime, bytes, chars, nchunks, fts_config)
SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(d), 12, '0'))::uuid, :'uid', 'Bench document ' || d, 'bench', 'text/plain', 0, 0, 100, 'english'
FROM generate_series(0, (:n - 1) / 100) d;

-- the name of chunk i: three or four syllables from i's digits in base 32
CREATE OR REPLACE FUNCTION pg_temp.bench_name(i bigint) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT s[1 + i % 32] || s[1 + (i / 32) % 32] || s[1 + (i / 1024) % 32] || s[1 + (i / 32768) % 32] || 'ix'
  FROM (SELECT array['ka','lo','mi','ren','tor','va','sel','dun','pha','gri','mo','len','sta','qui','bre','zo','tan','fel','ori','umb','che','ast','ple','vin','dor','kes','mar','nul','pes','rig','sut','wel'] AS s) t $$;

INSERT INTO utopia_chunks (document_id, user_id, position, heading, body, tsv)
SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(i / 100), 12, '0'))::uuid, :'uid', (i % 100)::int,
       'Bench document ' || (i / 100) || ' > ' || initcap(pg_temp.bench_name(i)), body,
       setweight(to_tsvector('english', 'Bench document ' || (i / 100) || ' ' || pg_temp.bench_name(i)), 'A') || to_tsvector('english', body)
FROM (
  SELECT n.i, initcap(pg_temp.bench_name(n.i)) || ' ' || string_agg(v.w || (array['', '', '', 's', 'ing', 'ed', 'er'])[1 + r.sfx], ' ') AS body
  FROM generate_series(0, :n - 1) AS n(i)
  CROSS JOIN LATERAL generate_series(1, 70 + (n.i % 40)::int) g
  CROSS JOIN LATERAL (SELECT floor(4000 * power(random(), 3))::int AS k, floor(random() * 7)::int AS sfx WHERE g > 0) r
  JOIN vocab v ON v.i = r.k
  GROUP BY n.i
) t;

INSERT INTO utopia_terms (user_id, term, ndocs)
SELECT :'uid', t, count(*) FROM utopia_chunks c, unnest(tsvector_to_array(to_tsvector('simple', c.heading || ' ' || c.body))) t
WHERE c.user_id = :'uid' AND length(t) BETWEEN 3 AND 40 GROUP BY t
ON CONFLICT (user_id, term) DO UPDATE SET ndocs = utopia_terms.ndocs + EXCLUDED.ndocs;
-- the BM25 statistics (migration 0030) were kept by its triggers in the
-- chunks' INSERT, one pass over the statement's rows; a bench on wrong
-- statistics measures nothing, so they are checked against a recount here
DO $chk$
DECLARE bad bigint;
BEGIN
  WITH s AS (SELECT user_id, coalesce(chat_id, '00000000-0000-0000-0000-000000000000') AS chat_id,
                    count(*) AS n, sum(length(tsv)) AS len FROM utopia_chunks GROUP BY 1, 2),
       t AS (SELECT user_id, t AS term, coalesce(chat_id, '00000000-0000-0000-0000-000000000000')
                    AS chat_id, count(*)::int AS df
             FROM utopia_chunks, unnest(tsvector_to_array(tsv)) t GROUP BY 1, 2, 3)
  SELECT (SELECT count(*) FROM s FULL JOIN utopia_bm25_scopes x USING (user_id, chat_id)
          WHERE s.n IS DISTINCT FROM x.nchunks OR s.len IS DISTINCT FROM x.total_len)
       + (SELECT count(*) FROM t FULL JOIN utopia_bm25_terms x USING (user_id, term, chat_id)
          WHERE t.df IS DISTINCT FROM x.df) INTO bad;
  IF bad <> 0 THEN
    RAISE EXCEPTION 'corpus.sql: % rows of the BM25 statistics differ from a recount', bad;
  END IF;
END $chk$;
CREATE INDEX utopia_chunks_tsv ON utopia_chunks USING gin (tsv);
CREATE INDEX utopia_terms_prefix ON utopia_terms (user_id, term text_pattern_ops);
CREATE INDEX utopia_terms_suffix ON utopia_terms (user_id, reverse(term) text_pattern_ops);
COMMIT;
-- what autovacuum does to a table this size within minutes: hint bits, the
-- visibility map, statistics (so runs do not depend on when it came by)
VACUUM (ANALYZE) utopia_chunks, utopia_terms, utopia_bm25_scopes, utopia_bm25_terms;
