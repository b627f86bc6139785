-- The trace of a turn: model calls, tool calls (with their lane), sandbox and
-- browser spawns, subagents. Times are real measurements (monotonic durations).
CREATE TABLE spans (
    id uuid PRIMARY KEY,
    turn_id uuid NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    parent_id uuid,
    kind text NOT NULL,       -- turn, llm, tool, sandbox_spawn, subagent, browser_spawn
    name text NOT NULL,
    status text NOT NULL DEFAULT 'ok' CHECK (status IN ('ok', 'error', 'cancelled')),
    started_at timestamptz NOT NULL,
    duration_ms double precision NOT NULL,
    attrs jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX spans_turn ON spans (turn_id, started_at);
