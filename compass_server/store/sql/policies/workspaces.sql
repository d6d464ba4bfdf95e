-- after: 0001
DROP POLICY IF EXISTS workspace_only ON workspaces;
CREATE POLICY workspace_only ON workspaces AS PERMISSIVE FOR ALL TO compass_app, compass_maintenance, compass_writer
  USING ((id = ( SELECT compass_workspace() AS compass_workspace)))
  WITH CHECK ((id = ( SELECT compass_workspace() AS compass_workspace)));
