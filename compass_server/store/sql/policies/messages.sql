-- after: 0017
DROP POLICY IF EXISTS participating_delete ON messages;
CREATE POLICY participating_delete ON messages AS RESTRICTIVE FOR DELETE TO compass_app
  USING ((EXISTS ( SELECT 1
   FROM compass_participation p
  WHERE ((p.account_id = ( SELECT compass_actor() AS compass_actor)) AND (p.channel_id = messages.channel_id)))));

DROP POLICY IF EXISTS participating_read ON messages;
CREATE POLICY participating_read ON messages AS RESTRICTIVE FOR SELECT TO compass_app
  USING ((EXISTS ( SELECT 1
   FROM compass_participation p
  WHERE ((p.account_id = ( SELECT compass_actor() AS compass_actor)) AND (p.channel_id = messages.channel_id)))));

DROP POLICY IF EXISTS participating_update ON messages;
CREATE POLICY participating_update ON messages AS RESTRICTIVE FOR UPDATE TO compass_app
  USING ((EXISTS ( SELECT 1
   FROM compass_participation p
  WHERE ((p.account_id = ( SELECT compass_actor() AS compass_actor)) AND (p.channel_id = messages.channel_id)))));

DROP POLICY IF EXISTS participating_write ON messages;
CREATE POLICY participating_write ON messages AS RESTRICTIVE FOR INSERT TO compass_app
  WITH CHECK ((EXISTS ( SELECT 1
   FROM compass_participation p
  WHERE ((p.account_id = ( SELECT compass_actor() AS compass_actor)) AND (p.channel_id = messages.channel_id)))));

DROP POLICY IF EXISTS workspace_only ON messages;
CREATE POLICY workspace_only ON messages AS PERMISSIVE FOR ALL TO compass_app, compass_maintenance, compass_writer
  USING ((workspace_id = ( SELECT compass_workspace() AS compass_workspace)))
  WITH CHECK ((workspace_id = ( SELECT compass_workspace() AS compass_workspace)));
