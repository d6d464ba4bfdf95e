-- after: 0026
DROP POLICY IF EXISTS workspace_only ON post_keys;
CREATE POLICY workspace_only ON post_keys AS PERMISSIVE FOR ALL TO compass_app, compass_maintenance, compass_writer
  USING ((workspace_id = compass_workspace()))
  WITH CHECK ((workspace_id = compass_workspace()));
