-- after: 0054
DROP POLICY IF EXISTS own_backend ON compass_scopes;
CREATE POLICY own_backend ON compass_scopes AS PERMISSIVE FOR SELECT
  TO compass_app, compass_maintenance, compass_writer
  USING (pid = pg_backend_pid());
