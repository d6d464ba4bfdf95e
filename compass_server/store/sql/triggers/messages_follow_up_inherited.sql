-- after: 0036
CREATE OR REPLACE TRIGGER messages_follow_up_inherited BEFORE INSERT ON messages
  FOR EACH ROW WHEN (NEW.blocks @> '[{"kind": "ask", "ask": {"follow_up_inherit": true}}]')
  EXECUTE FUNCTION compass_follow_up_inherited();
