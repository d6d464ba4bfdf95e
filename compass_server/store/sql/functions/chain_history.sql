-- after: 0025

CREATE OR REPLACE FUNCTION compass_chain_history() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
  NEW.state_digest := sha256(convert_to(compass_ask_json(NEW.ask_id)::text, 'UTF8'));
  NEW.entry_hash := compass_history_hash(
    (SELECT h.entry_hash FROM ask_history h WHERE h.ask_id = NEW.ask_id ORDER BY h.id DESC LIMIT 1),
    NEW);
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION compass_chain_history() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_chain_history() TO PUBLIC;
