-- after: 0016
DROP POLICY IF EXISTS workspace_only ON webhook_attempts;
CREATE POLICY workspace_only ON webhook_attempts AS PERMISSIVE FOR ALL TO compass_app, compass_maintenance, compass_writer
  USING ((workspace_id = ( SELECT compass_workspace() AS compass_workspace)))
  WITH CHECK ((workspace_id = ( SELECT compass_workspace() AS compass_workspace)));
