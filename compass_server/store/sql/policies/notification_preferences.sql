-- after: 0031
DROP POLICY IF EXISTS workspace_only ON notification_preferences;
CREATE POLICY workspace_only ON notification_preferences AS PERMISSIVE FOR ALL TO compass_app, compass_maintenance
  USING ((workspace_id = ( SELECT w.w FROM compass_workspace_now() w)))
  WITH CHECK ((workspace_id = ( SELECT w.w FROM compass_workspace_now() w)));
