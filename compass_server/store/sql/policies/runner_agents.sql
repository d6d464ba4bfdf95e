-- after: 0001
DROP POLICY IF EXISTS workspace_only ON runner_agents;
CREATE POLICY workspace_only ON runner_agents AS PERMISSIVE FOR ALL TO compass_app, compass_maintenance, compass_writer
  USING ((workspace_id = ( SELECT compass_workspace() AS compass_workspace)))
  WITH CHECK ((workspace_id = ( SELECT compass_workspace() AS compass_workspace)));
