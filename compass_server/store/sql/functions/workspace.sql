-- after: 0001

-- The workspace a transaction is scoped to (compass_workspace_now), as a
-- value: for a function's statements and defaults; policies read the set.
CREATE OR REPLACE FUNCTION compass_workspace() RETURNS uuid
LANGUAGE sql STABLE AS $$
  SELECT w.w FROM public.compass_workspace_now() w
$$;
REVOKE ALL ON FUNCTION compass_workspace() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_workspace() TO PUBLIC;
