-- after: 0021
CREATE OR REPLACE TRIGGER asks_deadlines_posted AFTER INSERT ON asks
  REFERENCING NEW TABLE AS posted
  FOR EACH STATEMENT EXECUTE FUNCTION compass_deadlines_posted();
