-- after: 0016
DROP POLICY IF EXISTS workspace_only ON webhook_deliveries;
CREATE POLICY workspace_only ON webhook_deliveries AS PERMISSIVE FOR ALL TO compass_app, compass_maintenance, compass_writer
  USING ((workspace_id = ( SELECT w.w FROM compass_workspace_now() w)))
  WITH CHECK ((workspace_id = ( SELECT w.w FROM compass_workspace_now() w)));
