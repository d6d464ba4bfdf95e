-- after: 0021
CREATE OR REPLACE TRIGGER inbox_messages_kept AFTER UPDATE ON inbox_messages
  FOR EACH ROW EXECUTE FUNCTION compass_inbox_message_kept();
