-- after: 0026
CREATE OR REPLACE TRIGGER ask_prints_ended AFTER INSERT ON ask_history
  FOR EACH ROW
  WHEN (compass_history_ends(NEW.kind))
  EXECUTE FUNCTION compass_forget_print();
