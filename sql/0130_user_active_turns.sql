-- USER_MAX_ACTIVE_TURNS: a user's turns queued or running at once across all
-- of their chats, checked in tusko_turn_create's round trip. The check and the
-- insert are made atomic per user by locking the user's row (FOR NO KEY
-- UPDATE: it does not block the foreign-key checks of rows that reference the
-- user), so concurrent submissions on any number of instances never exceed the
-- limit. New outcome 'too_many_turns' (busy_turn: one of the active turns).
-- p_max_active <= 0: no limit. The count reads the partial indexes of active
-- turns (0010's turns_one_active: only turns queued or running, few at any
-- time), so no index is built here and no large table is locked.

DROP FUNCTION tusko_turn_create(uuid, uuid, uuid, text, uuid, text, text[], text, uuid, text,
                                integer, interval);

CREATE FUNCTION tusko_turn_create(p_message uuid, p_session uuid, p_user uuid, p_content text,
                                  p_turn uuid, p_model text, p_allowed text[], p_default text,
                                  p_instance uuid, p_rate_key text, p_rate_max integer,
                                  p_rate_window interval, p_max_active integer,
                                  OUT outcome text, OUT model text, OUT busy_turn uuid,
                                  OUT retry_after_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
    chat_model text;
    allowed boolean;
    active integer;
BEGIN
    SELECT r.allowed, r.retry_after_ms INTO allowed, retry_after_ms
        FROM tusko_rate_take(p_rate_key, p_rate_max, p_rate_window) r;
    IF NOT allowed THEN
        outcome := 'rate_limited';
        RETURN;
    END IF;
    SELECT s.model INTO chat_model FROM chat_sessions s WHERE s.id = p_session AND s.user_id = p_user;
    IF NOT FOUND THEN
        outcome := 'missing';
        RETURN;
    END IF;
    SELECT t.id INTO busy_turn FROM turns t
        WHERE t.session_id = p_session AND t.state IN ('queued', 'running');
    IF FOUND THEN
        outcome := 'busy';
        RETURN;
    END IF;
    IF p_max_active > 0 THEN
        PERFORM 1 FROM users u WHERE u.id = p_user FOR NO KEY UPDATE;
        SELECT count(*), min(t.id::text)::uuid INTO active, busy_turn FROM turns t
            WHERE t.user_id = p_user AND t.state IN ('queued', 'running');
        IF active >= p_max_active THEN
            outcome := 'too_many_turns';
            RETURN;
        END IF;
        busy_turn := NULL;
    END IF;
    model := coalesce(p_model, CASE WHEN chat_model = ANY (p_allowed) THEN chat_model END, p_default);
    INSERT INTO messages (id, session_id, role, content, turn_id, step)
        VALUES (p_message, p_session, 'user', p_content, p_turn, 0);
    INSERT INTO turns (id, session_id, user_id, model, instance_id, user_message_id)
        VALUES (p_turn, p_session, p_user, model, p_instance, p_message);
    outcome := 'ok';
END
$$;
