-- after: 0025

CREATE OR REPLACE FUNCTION compass_forget_print() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
  DELETE FROM ask_prints WHERE ask_id = NEW.ask_id;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION compass_forget_print() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_forget_print() TO PUBLIC;
