-- after: 0027
CREATE OR REPLACE TRIGGER ask_prints_open BEFORE INSERT ON ask_prints
  FOR EACH ROW EXECUTE FUNCTION compass_print_if_open();
