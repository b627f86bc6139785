-- locks: audit_log
-- The audit log (docs/ADMIN.md, "Audit log") grows from 0040's record of
-- deleted accounts into the record of who did what, when and from where:
-- sign-ins and their failures, admin actions, token creations, sandbox spawns
-- and reaps, skill installs, schedule changes, model connection changes.
--   actor_id   the account that acted (NULL: the system, the CLI, or a failed
--              sign-in's unknown caller); not a foreign key, the entry
--              outlives the account
--   account_id the account acted upon, when there is one (now optional)
--   ip         the client address of the request, when there was one
--   target     what was acted upon besides an account ("sandbox:<id>", ...)
-- Kept AUDIT_RETENTION (default 180 days): tusko deletes older entries hourly.
-- Changing NOT NULL and adding NULL columns rewrites nothing.

ALTER TABLE audit_log ALTER COLUMN account_id DROP NOT NULL;
ALTER TABLE audit_log ADD COLUMN actor_id uuid;
ALTER TABLE audit_log ADD COLUMN ip text;
ALTER TABLE audit_log ADD COLUMN target text;
CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX audit_log_action ON audit_log (action, id);
CREATE INDEX audit_log_actor ON audit_log (actor_id, id) WHERE actor_id IS NOT NULL;
