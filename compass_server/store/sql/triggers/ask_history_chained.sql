-- after: 0026
CREATE OR REPLACE TRIGGER ask_history_chained BEFORE INSERT ON ask_history
  FOR EACH ROW EXECUTE FUNCTION compass_chain_history();
