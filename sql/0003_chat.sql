-- Chat sessions and their messages. Turns, events, spans, sandboxes and
-- downloads live in 0010..0019 (the agent), which may add columns here.
CREATE TABLE chat_sessions (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    title text NOT NULL DEFAULT 'New chat',
    model text,                   -- an allowlisted id ("openai:gpt-4o-mini"); NULL: the default
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX chat_sessions_user ON chat_sessions (user_id, updated_at DESC, id);

CREATE TABLE messages (
    id uuid PRIMARY KEY,
    session_id uuid NOT NULL REFERENCES chat_sessions (id) ON DELETE CASCADE,
    seq bigint GENERATED ALWAYS AS IDENTITY,  -- the order within a session
    role text NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX messages_session_seq ON messages (session_id, seq);
