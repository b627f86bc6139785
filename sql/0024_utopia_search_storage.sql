-- Utopia search at scale (bench/search, docs/UTOPIA.md "Measured"):
-- 1. A chunk's tsvector stays in its row (compressed if need be) and the body
--    goes out of line first: every ranking reads the tsvector of each of its
--    candidates (@@ on a scan, ts_rank_cd), the body only for the few snippets
--    shown. With the default (EXTENDED), a ~1.3 KB tsvector beside a ~1 KB body
--    was moved to the TOAST table: two more page reads per candidate.
--
-- locks: utopia_chunks
-- (the UPDATE below rewrites every chunk, and ALTER ... SET STORAGE holds
-- an ACCESS EXCLUSIVE lock on the table until the migration commits)
ALTER TABLE utopia_chunks ALTER COLUMN tsv SET STORAGE MAIN;
-- existing chunks are rewritten once so that they are stored the new way
UPDATE utopia_chunks SET tsv = tsv || ''::tsvector;
-- 2. Statistics on the length of vocabulary words: the typo lookup filters a
--    prefix or suffix range by length, and without them the planner guessed
--    0.5% of the range and built a bitmap of all of it (32,768 entries at 1M
--    chunks) instead of stopping after the first 1,500.
CREATE STATISTICS utopia_terms_length ON (length(term)) FROM utopia_terms;
ANALYZE utopia_terms;
