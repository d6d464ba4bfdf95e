-- after: 0054

-- The account a transaction names in compass.actor, if its credential
-- vouches for it (the credential's own account, or an agent assigned to the
-- credential's runner) and still signs in, proved by a query now: for a
-- transaction that noted no scope (compass_note_scope). NULL otherwise.
-- Every name is qualified: it runs as the owner with the caller's
-- search_path.
CREATE OR REPLACE FUNCTION compass_vouched_actor() RETURNS uuid
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
DECLARE
  named pg_catalog.uuid :=
    nullif(pg_catalog.current_setting('compass.actor', true), '')::pg_catalog.uuid;
  vouched pg_catalog.uuid;
BEGIN
  IF named IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT named INTO vouched FROM public.credentials c
    WHERE c.token_hash OPERATOR(pg_catalog.=) pg_catalog.decode(
        pg_catalog.current_setting('compass.credential', true), 'hex')
      AND (c.revoked_at IS NULL OR c.revoked_at OPERATOR(pg_catalog.>=) pg_catalog.now())
      AND (c.expires_at IS NULL OR c.expires_at OPERATOR(pg_catalog.>) pg_catalog.now())
      AND (c.account_id OPERATOR(pg_catalog.=) named OR EXISTS (
        SELECT 1 FROM public.runner_agents ra
        WHERE ra.runner_id OPERATOR(pg_catalog.=) c.runner_id
          AND ra.agent_id OPERATOR(pg_catalog.=) named));
  RETURN vouched;
END
$$;
REVOKE ALL ON FUNCTION compass_vouched_actor() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_vouched_actor() TO compass_app, compass_maintenance, compass_writer;
