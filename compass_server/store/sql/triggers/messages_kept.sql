-- after: 0021
CREATE OR REPLACE TRIGGER messages_kept AFTER UPDATE ON messages
  FOR EACH ROW EXECUTE FUNCTION compass_message_kept();
