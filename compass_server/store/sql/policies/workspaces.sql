-- after: 0001
DROP POLICY IF EXISTS workspace_only ON workspaces;
CREATE POLICY workspace_only ON workspaces AS PERMISSIVE FOR ALL TO compass_app, compass_maintenance, compass_writer
  USING ((id = ( SELECT w.w FROM compass_workspace_now() w)))
  WITH CHECK ((id = ( SELECT w.w FROM compass_workspace_now() w)));
