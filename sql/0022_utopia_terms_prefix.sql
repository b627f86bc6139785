-- Utopia: typo candidates come from prefix and suffix ranges of the vocabulary
-- (btree), not from a trigram scan of it: at a million distinct words a GIN
-- trigram lookup costs hundreds of milliseconds, a range of a few thousand
-- words well under one (bench/search).
--
-- locks: utopia_terms
-- (both indexes are built under a SHARE lock: documents being added wait)
DROP INDEX IF EXISTS utopia_terms_trgm;
CREATE INDEX utopia_terms_prefix ON utopia_terms (user_id, term text_pattern_ops);
CREATE INDEX utopia_terms_suffix ON utopia_terms (user_id, reverse(term) text_pattern_ops);
