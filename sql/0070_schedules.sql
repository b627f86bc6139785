-- Scheduled tasks (docs/SCHEDULES.md): a schedule runs its prompt as an agent
-- turn, in a chat of its own, at the times its cron expression names in its
-- IANA zone. A slot is claimed by one instance in one transaction
-- (src/app/schedules/schedules_runner.c); its run row's unique
-- (schedule_id, scheduled_for) key is the backstop against running it twice.
-- Adds two columns to chat_sessions, one a foreign key whose check scans it:
-- locks: chat_sessions

-- A chat a scheduled run made is marked so (the sidebar groups them apart).
ALTER TABLE chat_sessions
    ADD COLUMN origin text NOT NULL DEFAULT 'user' CHECK (origin IN ('user', 'scheduled'));

CREATE TABLE schedules (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name text NOT NULL DEFAULT '' CHECK (length(name) <= 200),
    prompt text NOT NULL CHECK (length(prompt) BETWEEN 1 AND 32000),
    cron text NOT NULL CHECK (length(cron) BETWEEN 1 AND 256),
    zone text NOT NULL CHECK (length(zone) BETWEEN 1 AND 64),
    notify text NOT NULL DEFAULT 'failure' CHECK (notify IN ('always', 'failure', 'never')),
    paused boolean NOT NULL DEFAULT false,
    missed_policy text NOT NULL DEFAULT 'skip' CHECK (missed_policy IN ('skip', 'run_once')),
    next_run_at timestamptz,             -- NULL: it fires no more (a past one-shot)
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    deleted_at timestamptz               -- deleted: its history is kept
);
CREATE INDEX schedules_due ON schedules (next_run_at)
    WHERE deleted_at IS NULL AND NOT paused AND next_run_at IS NOT NULL;
CREATE INDEX schedules_user ON schedules (user_id, created_at) WHERE deleted_at IS NULL;

ALTER TABLE chat_sessions
    ADD COLUMN schedule_id uuid REFERENCES schedules (id) ON DELETE SET NULL;

CREATE TABLE schedule_runs (
    id uuid PRIMARY KEY,
    schedule_id uuid NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    scheduled_for timestamptz NOT NULL,  -- the slot (run now: the time it was asked for)
    trigger text NOT NULL DEFAULT 'schedule' CHECK (trigger IN ('schedule', 'catch_up', 'manual')),
    status text NOT NULL DEFAULT 'queued' CHECK (status IN
        ('queued', 'running', 'succeeded', 'failed', 'skipped', 'missed', 'timed_out')),
    instance_id uuid,                    -- the instance that claimed it (starts it)
    session_id uuid REFERENCES chat_sessions (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    finished_at timestamptz,
    error text CHECK (length(error) <= 1000),
    summary text CHECK (length(summary) <= 200),
    UNIQUE (schedule_id, scheduled_for)
);
CREATE INDEX schedule_runs_history ON schedule_runs (schedule_id, scheduled_for DESC);
CREATE INDEX schedule_runs_active ON schedule_runs (schedule_id)
    WHERE status IN ('queued', 'running');
CREATE INDEX schedule_runs_session ON schedule_runs (session_id) WHERE session_id IS NOT NULL;

-- The zone must be one Postgres knows too (the C side reads the same
-- zoneinfo; this keeps a name the database cannot use out).
CREATE FUNCTION tusko_schedule_zone_check() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = NEW.zone) THEN
        RAISE EXCEPTION 'unknown time zone "%"', NEW.zone USING ERRCODE = '22023';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER schedules_zone BEFORE INSERT OR UPDATE OF zone ON schedules
    FOR EACH ROW EXECUTE FUNCTION tusko_schedule_zone_check();

-- Every scheduler sleeps until the next due time or a change of a schedule or
-- a run to start: LISTEN tusko_schedules.
CREATE FUNCTION tusko_schedule_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tusko_schedules', NEW.id::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER schedules_changed AFTER INSERT OR UPDATE OF next_run_at, paused, deleted_at
    ON schedules FOR EACH ROW EXECUTE FUNCTION tusko_schedule_changed();

-- A scheduled run's turn ended: the run ends with it (on whichever instance ran
-- it, also when a dead instance's turn is failed by the recovery sweep). Only
-- a run still 'running' changes: a timed-out one keeps its status.
CREATE FUNCTION tusko_schedule_run_finish() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE schedule_runs r SET
        status = CASE NEW.state WHEN 'done' THEN 'succeeded' ELSE 'failed' END,
        finished_at = coalesce(NEW.finished_at, now()),
        error = CASE WHEN NEW.state = 'done' THEN NULL
                     ELSE left(coalesce(NEW.error_code || ': ', '') || coalesce(NEW.error, NEW.state), 1000) END,
        summary = (SELECT left(m.content, 200) FROM messages m
                   WHERE m.turn_id = NEW.id AND m.role = 'assistant' AND m.content <> ''
                   ORDER BY m.seq DESC LIMIT 1)
        WHERE r.session_id = NEW.session_id AND r.status = 'running';
    IF FOUND THEN
        PERFORM pg_notify('tusko_schedules', NEW.session_id::text);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER turns_schedule_run AFTER UPDATE OF state ON turns
    FOR EACH ROW WHEN (NEW.state IN ('done', 'failed', 'cancelled') AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION tusko_schedule_run_finish();

-- Creating a schedule: the owner exists, has fewer than p_max schedules (under
-- a lock of the user's row, so two creates at once cannot both pass), the
-- zone is known. outcome: 'ok', 'missing' (no such user), 'limit'.
CREATE FUNCTION tusko_schedule_create(p_id uuid, p_user uuid, p_name text, p_prompt text,
                                      p_cron text, p_zone text, p_notify text, p_paused boolean,
                                      p_missed text, p_next timestamptz, p_max integer,
                                      OUT outcome text)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM users WHERE id = p_user FOR UPDATE;
    IF NOT FOUND THEN
        outcome := 'missing';
        RETURN;
    END IF;
    IF (SELECT count(*) FROM schedules WHERE user_id = p_user AND deleted_at IS NULL) >= p_max THEN
        outcome := 'limit';
        RETURN;
    END IF;
    INSERT INTO schedules (id, user_id, name, prompt, cron, zone, notify, paused, missed_policy,
                           next_run_at)
        VALUES (p_id, p_user, p_name, p_prompt, p_cron, p_zone, p_notify, p_paused, p_missed,
                p_next);
    outcome := 'ok';
END
$$;

-- Run now: a queued run of the schedule (paused or not; next_run_at stays) for
-- instance p_instance to start, unless one is queued or running (under the
-- schedule's row lock, so two at once cannot both pass). outcome: 'ok' (run:
-- the new run's id), 'missing', 'busy' (run: the active one).
CREATE FUNCTION tusko_schedule_run_now(p_schedule uuid, p_user uuid, p_run uuid, p_instance uuid,
                                       OUT outcome text, OUT run uuid)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM schedules WHERE id = p_schedule AND user_id = p_user AND deleted_at IS NULL
        FOR UPDATE;
    IF NOT FOUND THEN
        outcome := 'missing';
        RETURN;
    END IF;
    SELECT r.id INTO run FROM schedule_runs r
        WHERE r.schedule_id = p_schedule AND r.status IN ('queued', 'running') LIMIT 1;
    IF FOUND THEN
        outcome := 'busy';
        RETURN;
    END IF;
    INSERT INTO schedule_runs (id, schedule_id, scheduled_for, trigger, status, instance_id)
        VALUES (p_run, p_schedule, clock_timestamp(), 'manual', 'queued', p_instance);
    run := p_run;
    outcome := 'ok';
END
$$;
