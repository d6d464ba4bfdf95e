-- after: 0001

-- The account a transaction acts as (compass_actor), as a set of one (or
-- none) that policies read in their InitPlan: inlined, so an account noted
-- for this transaction (compass_note_scope) is a join, not a statement; one
-- that noted none is proved now (compass_vouched_actor).
CREATE OR REPLACE FUNCTION compass_actor_now() RETURNS TABLE (a uuid)
LANGUAGE sql STABLE ROWS 1 AS $$
  SELECT coalesce(
    (SELECT s.actor_id FROM public.compass_scopes s
     WHERE s.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
       AND s.at OPERATOR(pg_catalog.=) pg_catalog.now()
       AND s.actor_id OPERATOR(pg_catalog.=)
           nullif(pg_catalog.current_setting('compass.actor', true), '')::pg_catalog.uuid),
    public.compass_vouched_actor())
$$;
REVOKE ALL ON FUNCTION compass_actor_now() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_actor_now() TO compass_app, compass_maintenance, compass_writer;
