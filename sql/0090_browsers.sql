-- The browser lane: each chat's browser session at the browser service
-- (tusko-browserd or Steel), at most one live per chat. Like the sandboxes,
-- a browser is reserved under a per-user advisory lock (tusko_browser_reserve)
-- so concurrent first browses on any number of instances never exceed
-- MAX_BROWSERS_PER_USER. session_id has no foreign key: the row outlives a
-- deleted chat until its remote session is released.
CREATE TABLE browsers (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    session_id uuid NOT NULL,
    remote_id text,                  -- the browser service's session id
    state text NOT NULL CHECK (state IN ('creating', 'live', 'gone')),
    gone_reason text,
    pool text,                       -- "warm" or "cold"
    created_at timestamptz NOT NULL DEFAULT now(),
    ready_at timestamptz,
    last_used_at timestamptz NOT NULL DEFAULT now(),
    gone_at timestamptz
);
CREATE UNIQUE INDEX browsers_one_per_session ON browsers (session_id)
    WHERE state IN ('creating', 'live');
CREATE INDEX browsers_user_active ON browsers (user_id) WHERE state IN ('creating', 'live');
CREATE INDEX browsers_live_used ON browsers (last_used_at) WHERE state = 'live';

-- Reserves a browser for p_session: 'exists' (the session has one, its id in
-- browser_id), 'quota' (p_max reached; live counts them), or 'reserved' (a
-- 'creating' row p_id was inserted; live counts it too). A 'creating' row
-- older than p_stale is from a creation that died: it is given up.
CREATE FUNCTION tusko_browser_reserve(p_id uuid, p_user uuid, p_session uuid, p_max integer,
                                      p_stale interval,
                                      OUT outcome text, OUT browser_id uuid, OUT live integer)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('tusko_browser_quota:' || p_user::text, 0));
    UPDATE browsers SET state = 'gone', gone_reason = 'creation interrupted', gone_at = now()
        WHERE user_id = p_user AND state = 'creating' AND created_at < now() - p_stale;
    SELECT b.id INTO browser_id FROM browsers b
        WHERE b.session_id = p_session AND b.state IN ('creating', 'live');
    SELECT count(*) INTO live FROM browsers b
        WHERE b.user_id = p_user AND b.state IN ('creating', 'live');
    IF browser_id IS NOT NULL THEN
        outcome := 'exists';
        RETURN;
    END IF;
    IF live >= p_max THEN
        outcome := 'quota';
        RETURN;
    END IF;
    INSERT INTO browsers (id, user_id, session_id, state) VALUES (p_id, p_user, p_session, 'creating');
    outcome := 'reserved';
    browser_id := p_id;
    live := live + 1;
END
$$;
