-- after: 0012

-- Numbering a workspace's committed events after a write: the writer's
-- server does it for any workspace it wrote to. It reads and changes nothing
-- but the numbering, so it runs as the owner and tells the caller nothing.
CREATE OR REPLACE FUNCTION compass_number_events(ws uuid) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
  SELECT compass_sequence_events(ws)
$$;
REVOKE ALL ON FUNCTION compass_number_events(ws uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_number_events(ws uuid) TO compass_app;
