-- after: 0017
DROP POLICY IF EXISTS participating_delete ON channels;
CREATE POLICY participating_delete ON channels AS RESTRICTIVE FOR DELETE TO compass_app
  USING ((EXISTS ( SELECT 1
   FROM compass_participation p
  WHERE ((p.account_id = ( SELECT a.a FROM compass_actor_now() a)) AND (p.channel_id = channels.id)))));

DROP POLICY IF EXISTS participating_read ON channels;
-- Row-level security holds channels, their messages and asks' records to
-- the accounts that take part in them, on top of the workspace (the
-- operator's compass_maintenance reads none of these tables).
CREATE POLICY participating_read ON channels AS RESTRICTIVE FOR SELECT TO compass_app
  USING ((EXISTS ( SELECT 1
   FROM compass_participation p
  WHERE ((p.account_id = ( SELECT a.a FROM compass_actor_now() a)) AND (p.channel_id = channels.id)))));

DROP POLICY IF EXISTS participating_update ON channels;
CREATE POLICY participating_update ON channels AS RESTRICTIVE FOR UPDATE TO compass_app
  USING ((EXISTS ( SELECT 1
   FROM compass_participation p
  WHERE ((p.account_id = ( SELECT a.a FROM compass_actor_now() a)) AND (p.channel_id = channels.id)))));

DROP POLICY IF EXISTS workspace_only ON channels;
CREATE POLICY workspace_only ON channels AS PERMISSIVE FOR ALL TO compass_app, compass_maintenance, compass_writer
  USING ((workspace_id = ( SELECT w.w FROM compass_workspace_now() w)))
  WITH CHECK ((workspace_id = ( SELECT w.w FROM compass_workspace_now() w)));
