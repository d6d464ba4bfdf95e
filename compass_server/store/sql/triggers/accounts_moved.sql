-- after: 0017
CREATE OR REPLACE TRIGGER accounts_moved AFTER UPDATE OF parent_id ON accounts
  FOR EACH ROW EXECUTE FUNCTION compass_account_moved();
