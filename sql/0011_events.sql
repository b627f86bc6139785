-- The live events of chat sessions (text deltas, plans, tool calls, sandbox
-- spawns, errors, turn ends). seq is the SSE id: it comes from one sequence
-- and grows with every event, so a client resumes a session's stream with
-- Last-Event-ID (events of the session with a larger seq). Within a session the
-- order is the order of the instance that ran the turn: one writer thread
-- stores its events in order, and a turn runs on one instance.
--
-- Events are the hottest rows of the system (every text delta of every turn):
-- no foreign key (a key-share lock on the chat's row per event would cost more
-- than the insert), no per-session counter row to update, the data kept as the
-- JSON text it is served as. Deleting a chat deletes its events (the delete hook
-- calls tusko_session_events_delete; tusko_events_sweep removes strays).
CREATE SEQUENCE events_seq CACHE 100;

CREATE TABLE events (
    seq bigint PRIMARY KEY,
    session_id uuid NOT NULL,
    turn_id uuid,
    type text NOT NULL,
    data text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_session ON events (session_id, seq);

-- Appends a batch (parallel arrays, in order); returns each event's seq, in
-- the same order. (plpgsql: its plan is cached per connection.)
CREATE FUNCTION tusko_events_append(p_sessions uuid[], p_turns uuid[], p_types text[],
                                    p_data text[])
RETURNS TABLE (ord bigint, seq bigint)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    WITH ev AS MATERIALIZED (
        SELECT e.s, e.t, e.ty, e.d, e.o, nextval('events_seq') AS id
        FROM unnest(p_sessions, p_turns, p_types, p_data) WITH ORDINALITY AS e(s, t, ty, d, o)
    ), ins AS (
        INSERT INTO events (seq, session_id, turn_id, type, data)
        SELECT ev.id, ev.s, ev.t, ev.ty, ev.d FROM ev
        RETURNING 1
    )
    SELECT ev.o, ev.id FROM ev WHERE (SELECT count(*) FROM ins) >= 0 ORDER BY ev.o;
END
$$;

CREATE FUNCTION tusko_session_events_delete(p_session uuid) RETURNS void
LANGUAGE sql AS $$
    DELETE FROM events WHERE session_id = p_session
$$;

-- Events of chats that no longer exist (written while the chat was deleted).
CREATE FUNCTION tusko_events_sweep() RETURNS bigint
LANGUAGE sql AS $$
    WITH d AS (
        DELETE FROM events e
        WHERE NOT EXISTS (SELECT 1 FROM chat_sessions c WHERE c.id = e.session_id)
        RETURNING 1
    )
    SELECT count(*) FROM d
$$;
