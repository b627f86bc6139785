-- The plan of a chat session (plan_task): a goal and 3-5 milestones with their
-- status, updated as the work proceeds (across turns).
CREATE TABLE plans (
    session_id uuid PRIMARY KEY REFERENCES chat_sessions (id) ON DELETE CASCADE,
    plan jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
