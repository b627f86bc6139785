-- A user's data, found through the catalog: what GET /api/me/export writes
-- and what DELETE /api/me (and `tusko user delete`) removes. No list of
-- tables is kept anywhere: a table is the user's when it has a `user_id uuid`
-- column, or a foreign key to a table that is (users itself included), so a
-- table added later is exported and deleted without anyone remembering to.
-- A reference left without a foreign key on purpose is declared in
-- soft_foreign_keys and followed the same way. See docs/OPERATIONS.md,
-- "Export and deletion".

CREATE TABLE soft_foreign_keys (
    table_name text NOT NULL,
    column_name text NOT NULL,
    ref_table text NOT NULL,
    ref_column text NOT NULL,
    PRIMARY KEY (table_name, column_name)
);
-- events: no foreign key, for the cost of its lock on the hottest insert (0011)
INSERT INTO soft_foreign_keys VALUES ('events', 'session_id', 'chat_sessions', 'id');

-- The references of rel to other tables: foreign keys and declared soft ones,
-- as column lists over aliases a (rel) and pa (the referenced table).
CREATE FUNCTION tusko_owned_refs(rel regclass, a text, pa text,
                                 OUT parent regclass, OUT cols text, OUT refs text)
RETURNS SETOF record LANGUAGE sql STABLE AS $$
    SELECT c.confrelid::regclass,
           (SELECT string_agg(format('%I.%I', a, t.attname), ', ' ORDER BY k.i)
              FROM unnest(c.conkey) WITH ORDINALITY k(n, i)
              JOIN pg_attribute t ON t.attrelid = c.conrelid AND t.attnum = k.n),
           (SELECT string_agg(format('%I.%I', pa, t.attname), ', ' ORDER BY k.i)
              FROM unnest(c.confkey) WITH ORDINALITY k(n, i)
              JOIN pg_attribute t ON t.attrelid = c.confrelid AND t.attnum = k.n)
      FROM pg_constraint c
     WHERE c.contype = 'f' AND c.conrelid = rel AND c.confrelid <> rel
    UNION ALL
    SELECT to_regclass(s.ref_table), format('%I.%I', a, s.column_name), format('%I.%I', pa, s.ref_column)
      FROM soft_foreign_keys s
     WHERE to_regclass(s.table_name) = rel AND to_regclass(s.ref_table) IS NOT NULL
$$;

-- The condition (over alias `a`, with the user's id as $1) picking the rows of
-- rel that belong to the user, or NULL when none can: its own user_id, or a
-- reference into a table whose rows do (followed to any depth, each table
-- once per path, so a cycle ends).
CREATE FUNCTION tusko_owned_cond(rel regclass, a text, depth int, seen oid[]) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    conds text[] := '{}';
    fk record;
    pa text := 'o' || depth;
    pc text;
BEGIN
    IF rel = 'users'::regclass THEN
        RETURN format('%I.id = $1', a);
    END IF;
    IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = rel AND attname = 'user_id'
               AND atttypid = 'uuid'::regtype AND attnum > 0 AND NOT attisdropped) THEN
        conds := conds || format('%I.user_id = $1', a);
    END IF;
    FOR fk IN SELECT * FROM tusko_owned_refs(rel, a, pa) f
               WHERE NOT f.parent::oid = ANY (seen) ORDER BY f.parent::text, f.cols
    LOOP
        pc := tusko_owned_cond(fk.parent, pa, depth + 1, seen || rel::oid);
        IF pc IS NOT NULL THEN
            conds := conds || format('(%s) IN (SELECT %s FROM %s %I WHERE %s)',
                                     fk.cols, fk.refs, fk.parent, pa, pc);
        END IF;
    END LOOP;
    IF cardinality(conds) = 0 THEN
        RETURN NULL;
    END IF;
    RETURN '(' || array_to_string(conds, ' OR ') || ')';
END $$;

-- The longest path of references from rel to users (0: users itself; NULL:
-- none), so that deleting the deepest tables first never needs a row already
-- gone to find the next ones.
CREATE FUNCTION tusko_owned_depth(rel regclass, seen oid[]) RETURNS int
LANGUAGE plpgsql STABLE AS $$
DECLARE
    best int;
    d int;
    fk record;
BEGIN
    IF rel = 'users'::regclass THEN
        RETURN 0;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = rel AND attname = 'user_id'
               AND atttypid = 'uuid'::regtype AND attnum > 0 AND NOT attisdropped) THEN
        best := 1;
    END IF;
    FOR fk IN SELECT * FROM tusko_owned_refs(rel, 'a', 'b') f WHERE NOT f.parent::oid = ANY (seen) LOOP
        d := tusko_owned_depth(fk.parent, seen || rel::oid);
        IF d IS NOT NULL AND (best IS NULL OR d + 1 > best) THEN
            best := d + 1;
        END IF;
    END LOOP;
    RETURN best;
END $$;

-- Every table holding rows of a user: the condition over alias `t` ($1: the
-- user's id) and its depth; users first, then by name.
CREATE FUNCTION tusko_user_tables(OUT tbl text, OUT cond text, OUT depth int) RETURNS SETOF record
LANGUAGE sql STABLE AS $$
    SELECT * FROM (
        SELECT c.oid::regclass::text AS tbl, tusko_owned_cond(c.oid, 't', 0, '{}') AS cond,
               tusko_owned_depth(c.oid, '{}') AS depth
          FROM pg_class c
         WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
           AND NOT c.relispartition) x
     WHERE x.cond IS NOT NULL
     ORDER BY x.depth <> 0, x.tbl
$$;

-- What was done to accounts that no longer exist: who did it and how many rows
-- went. account_id is not a foreign key (the account is gone) and the email is
-- not kept.
CREATE TABLE audit_log (
    id bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT now(),
    action text NOT NULL,
    actor text NOT NULL,          -- 'self' (DELETE /api/me), 'cli' (tusko user delete)
    account_id uuid NOT NULL,
    detail jsonb NOT NULL DEFAULT '{}'
);

-- Deletes a user and everything of theirs in one transaction: the row counts
-- of each table as they were (the answer, also written to audit_log), then the
-- rows of each table, the deepest first and the account last (so nothing
-- rests on a cascade or on a foreign key existing), then the rate limiter's
-- keys naming the user. outcome: 'ok', 'missing' (no such user), 'busy' (a
-- turn is queued or running: busy_turn) or 'sandboxes' (a sandbox not yet
-- released: the caller releases them through the service first, as nothing
-- here can, and tries again).
CREATE FUNCTION tusko_user_delete(p_user uuid, p_actor text,
                                  OUT outcome text, OUT counts jsonb, OUT busy_turn uuid)
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    n bigint;
    v_email text;
BEGIN
    counts := '{}';
    -- the row lock: a turn being created for the user waits, then finds no user
    SELECT u.email INTO v_email FROM users u WHERE u.id = p_user FOR UPDATE;
    IF NOT FOUND THEN
        outcome := 'missing';
        RETURN;
    END IF;
    SELECT t.id INTO busy_turn FROM turns t WHERE t.user_id = p_user AND t.state IN ('queued', 'running') LIMIT 1;
    IF FOUND THEN
        outcome := 'busy';
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM sandboxes s WHERE s.user_id = p_user AND s.state <> 'gone') THEN
        outcome := 'sandboxes';
        RETURN;
    END IF;
    FOR r IN SELECT * FROM tusko_user_tables() LOOP
        EXECUTE format('SELECT count(*) FROM %s t WHERE %s', r.tbl, r.cond) INTO n USING p_user;
        IF n > 0 THEN
            counts := counts || jsonb_build_object(r.tbl, n);
        END IF;
    END LOOP;
    FOR r IN SELECT * FROM tusko_user_tables() ORDER BY depth DESC, tbl LOOP
        EXECUTE format('DELETE FROM %s t WHERE %s', r.tbl, r.cond) USING p_user;
    END LOOP;
    DELETE FROM rate_events WHERE key = 'chat:' || p_user::text OR key = 'login:acct:' || v_email;
    INSERT INTO audit_log (action, actor, account_id, detail)
        VALUES ('account deleted', p_actor, p_user, jsonb_build_object('rows', counts));
    outcome := 'ok';
END $$;
