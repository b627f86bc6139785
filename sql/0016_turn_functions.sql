-- The statements a turn runs, as plpgsql functions: their plans are cached per
-- connection (a turn is a handful of round trips, thousands of turns at once).

-- POST /api/sessions/{id}/messages, in one round trip: first the chat rate
-- limit (tusko_rate_take on p_rate_key, the key app_ratelimit_take uses), then
-- the chat is p_user's, its model (p_model, else the chat's own when still
-- allowed, else p_default), the user message and the queued turn. outcome:
-- 'ok', 'rate_limited' (retry_after_ms), 'missing' (not the user's chat) or
-- 'busy' (a turn is active; busy_turn says which). A concurrent second turn
-- still meets the unique index (SQLSTATE 23505).
CREATE FUNCTION tusko_turn_create(p_message uuid, p_session uuid, p_user uuid, p_content text,
                                  p_turn uuid, p_model text, p_allowed text[], p_default text,
                                  p_instance uuid, p_rate_key text, p_rate_max integer,
                                  p_rate_window interval,
                                  OUT outcome text, OUT model text, OUT busy_turn uuid,
                                  OUT retry_after_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
    chat_model text;
    allowed boolean;
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
    model := coalesce(p_model, CASE WHEN chat_model = ANY (p_allowed) THEN chat_model END, p_default);
    INSERT INTO messages (id, session_id, role, content, turn_id, step)
        VALUES (p_message, p_session, 'user', p_content, p_turn, 0);
    INSERT INTO turns (id, session_id, user_id, model, instance_id, user_message_id)
        VALUES (p_turn, p_session, p_user, model, p_instance, p_message);
    outcome := 'ok';
END
$$;

-- The turn starts running (false when it is no longer queued: cancelled or
-- failed meanwhile) and the conversation: the last p_limit messages, oldest
-- first, as neutral messages (see src/app/agent/history.h).
CREATE FUNCTION tusko_turn_start(p_turn uuid, p_session uuid, p_limit integer,
                                 OUT started boolean, OUT history text)
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE turns SET state = 'running', started_at = now() WHERE id = p_turn AND state = 'queued';
    started := FOUND;
    IF NOT started THEN
        RETURN;
    END IF;
    SELECT coalesce(jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
               'role', m.role, 'content', m.content, 'tool_calls', m.tool_calls,
               'tool_call_id', m.tool_call_id, 'is_error', CASE WHEN m.is_error THEN true END))
               ORDER BY m.seq), '[]')::text
        INTO history
        FROM (SELECT * FROM messages WHERE session_id = p_session AND role <> 'system'
              ORDER BY seq DESC LIMIT p_limit) m;
END
$$;

-- Ended spans of a turn, as a JSON array of {id, parent_id, kind, name,
-- status, started_at, duration_ms, attrs}.
CREATE FUNCTION tusko_spans_add(p_turn uuid, p_spans jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_spans IS NULL OR jsonb_array_length(p_spans) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO spans (id, turn_id, parent_id, kind, name, status, started_at, duration_ms, attrs)
        SELECT x.id, p_turn, x.parent_id, x.kind, x.name, x.status, x.started_at, x.duration_ms,
               coalesce(x.attrs, '{}')
        FROM jsonb_to_recordset(p_spans) AS x(id uuid, parent_id uuid, kind text, name text,
             status text, started_at timestamptz, duration_ms double precision, attrs jsonb)
        ON CONFLICT (id) DO NOTHING;
END
$$;

-- A message the agent loop adds (an answer or a tool result) with the spans
-- ended so far.
CREATE FUNCTION tusko_message_add(p_id uuid, p_session uuid, p_role text, p_content text,
                                  p_turn uuid, p_step integer, p_tool_calls jsonb,
                                  p_tool_call_id text, p_tool_name text, p_is_error boolean,
                                  p_partial boolean, p_spans jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM tusko_spans_add(p_turn, p_spans);
    INSERT INTO messages (id, session_id, role, content, turn_id, step, tool_calls, tool_call_id,
                          tool_name, is_error, partial)
        VALUES (p_id, p_session, p_role, p_content, p_turn, p_step, p_tool_calls, p_tool_call_id,
                p_tool_name, p_is_error, p_partial);
END
$$;

-- The end of a turn: its spans, its row (only if still active: a turn the
-- recovery already failed stays failed) and the chat's place in the list.
CREATE FUNCTION tusko_turn_finish(p_turn uuid, p_state text, p_error_code text, p_error text,
                                  p_steps integer, p_tool_calls integer, p_in bigint, p_out bigint,
                                  p_session uuid, p_spans jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM tusko_spans_add(p_turn, p_spans);
    UPDATE turns SET state = p_state, error_code = p_error_code, error = p_error, steps = p_steps,
                     tool_calls = p_tool_calls, input_tokens = p_in, output_tokens = p_out,
                     finished_at = now()
        WHERE id = p_turn AND state IN ('queued', 'running');
    UPDATE chat_sessions SET updated_at = now() WHERE id = p_session;
END
$$;
