-- after: 0047
DROP POLICY IF EXISTS workspace_only ON hook_tokens;
CREATE POLICY workspace_only ON hook_tokens AS PERMISSIVE FOR ALL TO compass_app, compass_maintenance
  USING ((workspace_id = ( SELECT compass_workspace() AS compass_workspace)))
  WITH CHECK ((workspace_id = ( SELECT compass_workspace() AS compass_workspace)));
