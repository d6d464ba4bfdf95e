-- after: 0008

-- The nearest deadline of any open ask, across workspaces: when the sweep
-- should next run.
CREATE OR REPLACE FUNCTION compass_next_ask_deadline() RETURNS timestamptz
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT min(due_at) FROM asks WHERE due_at IS NOT NULL
$$;
REVOKE ALL ON FUNCTION compass_next_ask_deadline() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_next_ask_deadline() TO compass_maintenance;
