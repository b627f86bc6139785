-- Turns: one POST /api/sessions/{id}/messages and everything it set in motion.
-- At most one turn per chat session is queued or running at a time (the
-- partial unique index), across every instance.
--
-- locks: messages
-- (messages_turn is built under a SHARE lock on messages: new messages wait
-- until it is; tusko serve leaves this migration to `tusko migrate` when
-- messages is large)
CREATE TABLE turns (
    id uuid PRIMARY KEY,
    session_id uuid NOT NULL REFERENCES chat_sessions (id) ON DELETE CASCADE,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    model text NOT NULL,                 -- the allowlisted id, "openai:gpt-4o-mini"
    state text NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    error_code text,
    error text,
    instance_id uuid NOT NULL,           -- the tusko process that runs it
    user_message_id uuid,
    steps integer NOT NULL DEFAULT 0,    -- model calls made
    tool_calls integer NOT NULL DEFAULT 0,
    input_tokens bigint,
    output_tokens bigint,
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    finished_at timestamptz
);
CREATE UNIQUE INDEX turns_one_active ON turns (session_id) WHERE state IN ('queued', 'running');
CREATE INDEX turns_active_instance ON turns (instance_id) WHERE state IN ('queued', 'running');
CREATE INDEX turns_session ON turns (session_id, created_at);

-- What the agent loop stores beside the text: the tool calls an assistant
-- message made, the call a tool message answers, the turn and step it belongs to.
ALTER TABLE messages
    ADD COLUMN turn_id uuid,
    ADD COLUMN step integer,
    ADD COLUMN tool_calls jsonb,         -- [{"id","name","arguments"}] (assistant)
    ADD COLUMN tool_call_id text,        -- (tool)
    ADD COLUMN tool_name text,           -- (tool)
    ADD COLUMN is_error boolean NOT NULL DEFAULT false,
    ADD COLUMN partial boolean NOT NULL DEFAULT false; -- an answer cut short (error, cancel, restart)
CREATE INDEX messages_turn ON messages (turn_id);
