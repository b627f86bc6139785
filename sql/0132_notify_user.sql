-- notify_user (docs/NOTIFY.md): a turn may send one message to its user's
-- linked Telegram chat; the message keeps its turn, and the unique index makes
-- "one a turn" hold whatever retries or instances do.
-- The new index reads the whole outbox:
-- locks: telegram_outbox
ALTER TABLE telegram_outbox ADD COLUMN turn_id uuid;
CREATE UNIQUE INDEX telegram_outbox_turn ON telegram_outbox (turn_id) WHERE turn_id IS NOT NULL;
