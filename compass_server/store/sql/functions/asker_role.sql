-- after: 0028

-- The role the transaction runs as: a SECURITY DEFINER function's
-- current_user is its owner, but the role its caller took stays in `role`.
CREATE OR REPLACE FUNCTION compass_asker_role() RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT pg_catalog.current_setting('role')
$$;
REVOKE ALL ON FUNCTION compass_asker_role() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_asker_role() TO PUBLIC;
