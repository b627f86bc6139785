-- The turn starts of a chat, for opening a long chat at its last turns
-- (GET /api/sessions/{id}/events?turns=N): the N-th most recent turn_start of
-- a session before a seq is a walk of N+1 entries of this partial index, not
-- a scan of the chat's events (events_session holds every text delta). The
-- route's query names type = 'turn_start' literally so the planner matches
-- the predicate.
CREATE INDEX events_turn_start ON events (session_id, seq) WHERE type = 'turn_start';
