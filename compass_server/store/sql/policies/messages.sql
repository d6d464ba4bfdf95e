-- after: 0017
DROP POLICY IF EXISTS participating_delete ON messages;
CREATE POLICY participating_delete ON messages AS RESTRICTIVE FOR DELETE TO compass_app
  USING ((EXISTS ( SELECT 1
   FROM compass_participation p
  WHERE ((p.account_id = ( SELECT a.a FROM compass_actor_now() a)) AND (p.channel_id = messages.channel_id)))));

DROP POLICY IF EXISTS participating_read ON messages;
CREATE POLICY participating_read ON messages AS RESTRICTIVE FOR SELECT TO compass_app
  USING ((EXISTS ( SELECT 1
   FROM compass_participation p
  WHERE ((p.account_id = ( SELECT a.a FROM compass_actor_now() a)) AND (p.channel_id = messages.channel_id)))));

DROP POLICY IF EXISTS participating_update ON messages;
CREATE POLICY participating_update ON messages AS RESTRICTIVE FOR UPDATE TO compass_app
  USING ((EXISTS ( SELECT 1
   FROM compass_participation p
  WHERE ((p.account_id = ( SELECT a.a FROM compass_actor_now() a)) AND (p.channel_id = messages.channel_id)))));

DROP POLICY IF EXISTS participating_write ON messages;
CREATE POLICY participating_write ON messages AS RESTRICTIVE FOR INSERT TO compass_app
  WITH CHECK ((EXISTS ( SELECT 1
   FROM compass_participation p
  WHERE ((p.account_id = ( SELECT a.a FROM compass_actor_now() a)) AND (p.channel_id = messages.channel_id)))));

DROP POLICY IF EXISTS workspace_only ON messages;
CREATE POLICY workspace_only ON messages AS PERMISSIVE FOR ALL TO compass_app, compass_maintenance, compass_writer
  USING ((workspace_id = ( SELECT w.w FROM compass_workspace_now() w)))
  WITH CHECK ((workspace_id = ( SELECT w.w FROM compass_workspace_now() w)));
