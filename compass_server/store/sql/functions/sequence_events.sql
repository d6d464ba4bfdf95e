-- after: 0006

-- Numbers the workspace's committed, unnumbered events; returns the last id.
-- With wait false it returns NULL at once when another holds the counter: the
-- holder numbers everything committed before it took it.
CREATE OR REPLACE FUNCTION compass_sequence_events(ws uuid, wait boolean DEFAULT true) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  last_id bigint;
  n bigint;
BEGIN
  PERFORM set_config('compass.workspace_id', ws::text, true);
  IF wait THEN
    SELECT c.last_event_id INTO last_id FROM event_counters c
      WHERE c.workspace_id = ws FOR NO KEY UPDATE;
  ELSE
    SELECT c.last_event_id INTO last_id FROM event_counters c
      WHERE c.workspace_id = ws FOR NO KEY UPDATE SKIP LOCKED;
  END IF;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  n := compass_number_pending(ws, last_id) - last_id;
  IF n > 0 THEN
    last_id := last_id + n;
    UPDATE event_counters SET last_event_id = last_id WHERE workspace_id = ws;
    PERFORM pg_notify('compass_events', ws::text || ':' || last_id::text);
  END IF;
  RETURN last_id;
END
$$;
REVOKE ALL ON FUNCTION compass_sequence_events(ws uuid, wait boolean) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
