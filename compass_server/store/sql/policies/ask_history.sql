-- after: 0009
DROP POLICY IF EXISTS participating_read ON ask_history;
CREATE POLICY participating_read ON ask_history AS RESTRICTIVE FOR SELECT TO compass_app
  USING ((EXISTS ( SELECT 1
   FROM (asks a
     JOIN messages m ON ((m.id = a.message_id)))
  WHERE (a.ask_id = ask_history.ask_id))));

DROP POLICY IF EXISTS workspace_only ON ask_history;
CREATE POLICY workspace_only ON ask_history AS PERMISSIVE FOR ALL TO compass_app, compass_maintenance, compass_writer
  USING ((workspace_id = ( SELECT w.w FROM compass_workspace_now() w)))
  WITH CHECK ((workspace_id = ( SELECT w.w FROM compass_workspace_now() w)));
