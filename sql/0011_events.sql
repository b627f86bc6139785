-- The live events of a chat session (text deltas, plans, tool calls, sandbox
-- spawns, errors, turn ends), numbered per session: seq is the SSE id, so a
-- client resumes with Last-Event-ID. Numbers come from a per-session counter
-- row, so events of one session never get the same or an out-of-order number,
-- whichever instance writes them.
CREATE TABLE session_event_seq (
    session_id uuid PRIMARY KEY REFERENCES chat_sessions (id) ON DELETE CASCADE,
    last_seq bigint NOT NULL
);

CREATE TABLE events (
    session_id uuid NOT NULL REFERENCES chat_sessions (id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    turn_id uuid,
    type text NOT NULL,
    data jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX events_turn ON events (turn_id, seq);

-- Appends a batch (parallel arrays, in order) and returns each session's new
-- last_seq and how many it got: the k-th event of a session in the batch is
-- numbered last_seq - n + k.
CREATE FUNCTION tusko_events_append(p_sessions uuid[], p_turns uuid[], p_types text[],
                                    p_data text[])
RETURNS TABLE (session_id uuid, last_seq bigint, n bigint)
LANGUAGE sql AS $$
    WITH ev AS (
        SELECT e.s, e.t, e.ty, e.d, e.ord
        FROM unnest(p_sessions, p_turns, p_types, p_data) WITH ORDINALITY AS e(s, t, ty, d, ord)
    ), cnt AS (
        SELECT ev.s, count(*) AS n FROM ev GROUP BY ev.s
    ), bumped AS (
        INSERT INTO session_event_seq AS q (session_id, last_seq)
        SELECT cnt.s, cnt.n FROM cnt ORDER BY cnt.s
        ON CONFLICT ON CONSTRAINT session_event_seq_pkey
            DO UPDATE SET last_seq = q.last_seq + excluded.last_seq
        RETURNING q.session_id, q.last_seq
    ), ins AS (
        INSERT INTO events (session_id, seq, turn_id, type, data)
        SELECT ev.s, b.last_seq - c.n + row_number() OVER (PARTITION BY ev.s ORDER BY ev.ord),
               ev.t, ev.ty, ev.d::jsonb
        FROM ev JOIN bumped b ON b.session_id = ev.s JOIN cnt c ON c.s = ev.s
        RETURNING 1
    )
    SELECT b.session_id, b.last_seq, c.n FROM bumped b JOIN cnt c ON c.s = b.session_id
$$;
