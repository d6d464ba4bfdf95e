-- after: 0026

CREATE OR REPLACE FUNCTION compass_print_if_open() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM ask_history h
             WHERE h.ask_id = NEW.ask_id AND compass_history_ends(h.kind)) THEN
    RETURN NULL;
  END IF;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION compass_print_if_open() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_print_if_open() TO PUBLIC;
