-- after: 0003
DROP POLICY IF EXISTS workspace_only ON inbox_grants;
CREATE POLICY workspace_only ON inbox_grants AS PERMISSIVE FOR ALL TO compass_app, compass_maintenance, compass_writer
  USING ((workspace_id = ( SELECT w.w FROM compass_workspace_now() w)))
  WITH CHECK ((workspace_id = ( SELECT w.w FROM compass_workspace_now() w)));
