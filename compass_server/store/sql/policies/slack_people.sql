-- after: 0030
DROP POLICY IF EXISTS workspace_only ON slack_people;
CREATE POLICY workspace_only ON slack_people AS PERMISSIVE FOR ALL TO compass_app, compass_maintenance
  USING ((workspace_id = ( SELECT w.w FROM compass_workspace_now() w)))
  WITH CHECK ((workspace_id = ( SELECT w.w FROM compass_workspace_now() w)));
