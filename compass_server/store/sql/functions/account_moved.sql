-- after: 0016

-- The agents below one that moved take their new chain.
CREATE OR REPLACE FUNCTION compass_account_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.parent_id IS DISTINCT FROM OLD.parent_id THEN
    UPDATE accounts d SET chain = d.chain[1:array_position(d.chain, NEW.id) - 1] || NEW.chain
    WHERE d.id IN (SELECT s.id FROM compass_subtree(NEW.id) s WHERE s.depth > 0)
      AND NEW.id = ANY (d.chain);
  END IF;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION compass_account_moved() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_account_moved() TO PUBLIC;
