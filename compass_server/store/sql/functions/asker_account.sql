-- after: 0028

-- The account whose credential the transaction names, if it still signs in.
CREATE OR REPLACE FUNCTION compass_asker_account() RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  SELECT c.account_id FROM public.credentials c
  WHERE public.compass_asker_role() = 'compass_app'
    AND c.token_hash = decode(current_setting('compass.credential', true), 'hex')
    AND (c.revoked_at IS NULL OR c.revoked_at >= now())
    AND (c.expires_at IS NULL OR c.expires_at > now())
$$;
REVOKE ALL ON FUNCTION compass_asker_account() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_asker_account() TO compass_app, compass_maintenance;
