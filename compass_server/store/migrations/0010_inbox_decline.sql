-- A person's decline in an agent's inbox: the item's open ask ends declined,
-- with an optional reason the agent hears, and the item is closed by that
-- person (its revision stays; ReopenInboxItem takes it back, as for a close).
-- The ending is kept beside the ask's standing, as Ask.ending carries it
-- (migration 0009), so nothing rewrites the ask's content.
ALTER TABLE inbox_messages DROP CONSTRAINT inbox_messages_ask_status_check;
ALTER TABLE inbox_messages ADD CONSTRAINT inbox_messages_ask_status_check
  CHECK (ask_status IN ('open', 'replaced', 'answered', 'withdrawn', 'declined'));
ALTER TABLE inbox_messages ADD COLUMN ending jsonb;
ALTER TABLE inbox_messages ADD CONSTRAINT inbox_messages_ending_check
  CHECK ((ask_status = 'declined') = (ending IS NOT NULL));
