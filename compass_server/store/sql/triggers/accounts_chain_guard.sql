-- after: 0017
CREATE OR REPLACE TRIGGER accounts_chain_guard BEFORE UPDATE OF chain ON accounts
  FOR EACH ROW EXECUTE FUNCTION compass_account_chain_guard();
