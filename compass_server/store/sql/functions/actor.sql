-- after: 0016

-- The account a request acts as: the one its transaction names in
-- compass.actor, if compass_note_scope found its credential vouches for it
-- in this transaction, else (a transaction that noted none) if it does now
-- (compass_vouched_actor). NULL otherwise, and for the operator.
CREATE OR REPLACE FUNCTION compass_actor() RETURNS uuid
LANGUAGE sql STABLE AS $$
  SELECT coalesce(
    (SELECT s.actor_id FROM public.compass_scopes s
     WHERE s.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
       AND s.at OPERATOR(pg_catalog.=) pg_catalog.now()
       AND s.actor_id OPERATOR(pg_catalog.=)
           nullif(pg_catalog.current_setting('compass.actor', true), '')::pg_catalog.uuid),
    public.compass_vouched_actor())
$$;
REVOKE ALL ON FUNCTION compass_actor() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_actor() TO compass_app, compass_maintenance, compass_writer;
