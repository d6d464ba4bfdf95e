-- after: 0016

-- The account a request acts as (compass_actor_now), as a value: the one
-- its transaction names in compass.actor, if its credential vouches for it.
-- NULL otherwise, and for the operator.
CREATE OR REPLACE FUNCTION compass_actor() RETURNS uuid
LANGUAGE sql STABLE AS $$
  SELECT a.a FROM public.compass_actor_now() a
$$;
REVOKE ALL ON FUNCTION compass_actor() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_actor() TO compass_app, compass_maintenance, compass_writer;
