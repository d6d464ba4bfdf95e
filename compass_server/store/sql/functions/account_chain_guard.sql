-- after: 0016

-- Only the triggers above write a chain.
CREATE OR REPLACE FUNCTION compass_account_chain_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.chain IS DISTINCT FROM OLD.chain AND pg_trigger_depth() < 2 THEN
    RAISE EXCEPTION 'a chain follows the parents; set parent_id instead' USING ERRCODE = 'CT005';
  END IF;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION compass_account_chain_guard() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_account_chain_guard() TO PUBLIC;
