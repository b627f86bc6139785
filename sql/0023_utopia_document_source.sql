-- Utopia: where a document the agent saved came from (the chat and the turn
-- that saved it, like a fact's source). NULL for uploads. Not foreign keys:
-- a finding saved to the user's library outlives its chat.
ALTER TABLE utopia_documents ADD COLUMN source_chat_id uuid, ADD COLUMN source_turn_id uuid;
