-- after: 0032
CREATE OR REPLACE TRIGGER asks_follow_up_planned BEFORE INSERT ON asks
  FOR EACH ROW EXECUTE FUNCTION compass_follow_up_planned();
