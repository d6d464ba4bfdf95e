-- after: 0055
DROP POLICY IF EXISTS workspace_only ON slack_person_codes;
CREATE POLICY workspace_only ON slack_person_codes AS PERMISSIVE FOR ALL TO compass_app, compass_maintenance
  USING ((workspace_id = ( SELECT w.w FROM compass_workspace_now() w)))
  WITH CHECK ((workspace_id = ( SELECT w.w FROM compass_workspace_now() w)));
