-- after: 0017
CREATE OR REPLACE TRIGGER accounts_tree BEFORE INSERT OR UPDATE OF parent_id, owner_id ON accounts
  FOR EACH ROW EXECUTE FUNCTION compass_account_tree();
