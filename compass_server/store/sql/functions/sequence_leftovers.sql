-- after: 0006

-- Numbers every workspace's leftovers: events of a write whose server died
-- between its commit and its numbering. Runs as the owner to see them all;
-- skips a workspace whose counter is held (its holder numbers them), so a
-- sweep never queues behind the writers.
CREATE OR REPLACE FUNCTION compass_sequence_leftovers() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  ws uuid;
  n integer := 0;
BEGIN
  FOR ws IN SELECT DISTINCT workspace_id FROM events WHERE id IS NULL LOOP
    IF compass_sequence_events(ws, false) IS NOT NULL THEN
      n := n + 1;
    END IF;
  END LOOP;
  RETURN n;
END
$$;
ALTER FUNCTION compass_sequence_leftovers() SET enable_seqscan = off;
REVOKE ALL ON FUNCTION compass_sequence_leftovers() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_sequence_leftovers() TO compass_maintenance;
