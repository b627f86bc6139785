-- Telegram notifications (docs/NOTIFY.md): a user's linked chat, the one-time
-- codes that link it, the getUpdates offset, and the outgoing queue that one
-- instance's sender drains (src/app/notify/notify.c).
CREATE TABLE telegram_links (
    user_id uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    chat_id bigint NOT NULL UNIQUE,
    username text,
    active boolean NOT NULL DEFAULT true,
    inactive_reason text,                -- why not (the bot was blocked: 403)
    linked_at timestamptz NOT NULL DEFAULT now()
);

-- A code is kept as its SHA-256 (hex); it links once, within its life.
CREATE TABLE telegram_link_codes (
    code_hash text PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at timestamptz
);
CREATE INDEX telegram_link_codes_user ON telegram_link_codes (user_id);

CREATE TABLE telegram_state (
    id integer PRIMARY KEY CHECK (id = 1),
    update_offset bigint NOT NULL DEFAULT 0
);
INSERT INTO telegram_state (id) VALUES (1);

CREATE TABLE telegram_outbox (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id uuid REFERENCES users (id) ON DELETE CASCADE,  -- NULL: a reply to chat_id
    chat_id bigint,                      -- a reply's chat; else the user's linked chat
    text text NOT NULL CHECK (length(text) <= 100000),
    status text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'sent', 'failed')),
    attempts integer NOT NULL DEFAULT 0,
    parts_sent integer NOT NULL DEFAULT 0,  -- parts of a split text already sent
    not_before timestamptz NOT NULL DEFAULT now(),
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at timestamptz,
    error text,
    CHECK (user_id IS NOT NULL OR chat_id IS NOT NULL)
);
CREATE INDEX telegram_outbox_queued ON telegram_outbox (not_before) WHERE status = 'queued';

-- A run's outcome to its owner's Telegram chat, as the schedule's notify says
-- (always, or only when it did not succeed), when a chat is linked and active.
CREATE FUNCTION tusko_schedule_run_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    s record;
BEGIN
    SELECT sc.user_id, sc.notify, sc.zone, coalesce(nullif(sc.name, ''), left(sc.prompt, 60)) AS title
        INTO s FROM schedules sc WHERE sc.id = NEW.schedule_id;
    IF NOT FOUND OR s.notify = 'never' OR (s.notify = 'failure' AND NEW.status = 'succeeded') THEN
        RETURN NULL;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM telegram_links l WHERE l.user_id = s.user_id AND l.active) THEN
        RETURN NULL;
    END IF;
    INSERT INTO telegram_outbox (user_id, text) VALUES (s.user_id,
        format('Schedule "%s" %s (%s %s)', s.title, replace(NEW.status, '_', ' '),
               to_char(NEW.scheduled_for AT TIME ZONE s.zone, 'YYYY-MM-DD HH24:MI'), s.zone)
        || coalesce(E'\n\n' || coalesce(NEW.error, NEW.summary), ''));
    PERFORM pg_notify('tusko_telegram', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER schedule_runs_notify AFTER UPDATE OF status ON schedule_runs
    FOR EACH ROW WHEN (NEW.status IN ('succeeded', 'failed', 'timed_out')
                       AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION tusko_schedule_run_notify();

CREATE FUNCTION tusko_telegram_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tusko_telegram', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER telegram_outbox_queued AFTER INSERT ON telegram_outbox
    FOR EACH STATEMENT EXECUTE FUNCTION tusko_telegram_outbox_notify();

-- A code sent to the bot in private chat p_chat: when it is unused and alive,
-- it is used up and the chat becomes its user's (a chat another user had is
-- taken from them); the user's email, or NULL (wrong, used or expired).
CREATE FUNCTION tusko_telegram_link(p_hash text, p_chat bigint, p_username text,
                                    OUT email text, OUT linked boolean)
LANGUAGE plpgsql AS $$
DECLARE
    uid uuid;
BEGIN
    linked := false;
    UPDATE telegram_link_codes SET used_at = now()
        WHERE code_hash = p_hash AND used_at IS NULL AND expires_at > now()
        RETURNING user_id INTO uid;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    DELETE FROM telegram_links WHERE chat_id = p_chat AND user_id <> uid;
    INSERT INTO telegram_links (user_id, chat_id, username) VALUES (uid, p_chat, p_username)
        ON CONFLICT (user_id) DO UPDATE SET chat_id = EXCLUDED.chat_id,
            username = EXCLUDED.username, active = true, inactive_reason = NULL, linked_at = now();
    SELECT u.email INTO email FROM users u WHERE u.id = uid;
    linked := true;
END
$$;
