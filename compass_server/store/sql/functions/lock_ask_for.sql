-- after: 0019

-- The ask's message locked for `actor`, if its credential vouches for it and
-- it takes part in the channel; returns the asking agent (NULL: none of that).
CREATE OR REPLACE FUNCTION compass_lock_ask_for(cred bytea, actor uuid, ask text) RETURNS uuid
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
  proof record;
BEGIN
  proof := compass_proof(cred, actor);
  IF proof.ws IS NULL OR NOT proof.vouched THEN
    RETURN NULL;
  END IF;
  RETURN (SELECT (l.m).author_id FROM compass_lock_ask(ask, actor) l);
END
$$;
GRANT CREATE ON SCHEMA public TO compass_writer;
ALTER FUNCTION compass_lock_ask_for(cred bytea, actor uuid, ask text) OWNER TO compass_writer;
REVOKE CREATE ON SCHEMA public FROM compass_writer;
REVOKE ALL ON FUNCTION compass_lock_ask_for(cred bytea, actor uuid, ask text) FROM PUBLIC, compass_app, compass_maintenance;
GRANT EXECUTE ON FUNCTION compass_lock_ask_for(cred bytea, actor uuid, ask text) TO compass_app;
