-- Sandboxes the sandbox client made for chat sessions, one live per session.
-- 'creating' and 'live' rows count against MAX_SANDBOXES_PER_USER; a spawn
-- reserves its row under a per-user advisory lock (tusko_sandbox_reserve), so
-- concurrent spawns on any number of instances can never exceed the limit.
-- session_id has no foreign key: the row outlives a deleted chat until the
-- remote sandbox is released.
CREATE TABLE sandboxes (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    session_id uuid NOT NULL,
    remote_id text,                  -- the sandbox service's id
    state text NOT NULL CHECK (state IN ('creating', 'live', 'gone')),
    gone_reason text,
    pool text,                       -- "warm · native" or "cold"
    execd_url text,                  -- the execd endpoint through the server proxy
    execd_headers jsonb NOT NULL DEFAULT '{}',
    bash_session text,               -- execd bash session of this chat
    code_context text,               -- execd Python context of this chat
    created_at timestamptz NOT NULL DEFAULT now(),
    ready_at timestamptz,
    last_used_at timestamptz NOT NULL DEFAULT now(),
    renewed_at timestamptz,
    gone_at timestamptz,
    gone_noticed boolean NOT NULL DEFAULT false -- the user was told the workspace is gone
);
CREATE UNIQUE INDEX sandboxes_one_per_session ON sandboxes (session_id)
    WHERE state IN ('creating', 'live');
CREATE INDEX sandboxes_user_active ON sandboxes (user_id) WHERE state IN ('creating', 'live');
CREATE INDEX sandboxes_session ON sandboxes (session_id, created_at DESC);

-- Reserves a sandbox slot for p_session: 'exists' (the session already has one,
-- its id in sandbox_id), 'quota' (p_max reached; live counts them), or
-- 'reserved' (a 'creating' row p_id was inserted; live counts it too).
-- A 'creating' row older than p_stale is from a spawn that died: it is given up.
CREATE FUNCTION tusko_sandbox_reserve(p_id uuid, p_user uuid, p_session uuid, p_max integer,
                                      p_stale interval,
                                      OUT outcome text, OUT sandbox_id uuid, OUT live integer)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('tusko_sandbox_quota:' || p_user::text, 0));
    UPDATE sandboxes SET state = 'gone', gone_reason = 'creation interrupted', gone_at = now()
        WHERE user_id = p_user AND state = 'creating' AND created_at < now() - p_stale;
    SELECT s.id INTO sandbox_id FROM sandboxes s
        WHERE s.session_id = p_session AND s.state IN ('creating', 'live');
    IF FOUND THEN
        outcome := 'exists';
        SELECT count(*) INTO live FROM sandboxes s
            WHERE s.user_id = p_user AND s.state IN ('creating', 'live');
        RETURN;
    END IF;
    SELECT count(*) INTO live FROM sandboxes s
        WHERE s.user_id = p_user AND s.state IN ('creating', 'live');
    IF live >= p_max THEN
        outcome := 'quota';
        sandbox_id := NULL;
        RETURN;
    END IF;
    INSERT INTO sandboxes (id, user_id, session_id, state) VALUES (p_id, p_user, p_session, 'creating');
    outcome := 'reserved';
    sandbox_id := p_id;
    live := live + 1;
END
$$;
