-- after: 0055
DROP POLICY IF EXISTS workspace_only ON mail_reply_addresses;
CREATE POLICY workspace_only ON mail_reply_addresses AS PERMISSIVE FOR ALL TO compass_maintenance
  USING ((workspace_id = ( SELECT w.w FROM compass_workspace_now() w)))
  WITH CHECK ((workspace_id = ( SELECT w.w FROM compass_workspace_now() w)));
