-- after: 0012

-- 1. The scope, from the credential, while it still signs in: a revoked or
-- expired credential scopes nothing (one revoked by this very transaction
-- still scopes it to its end, so an admin who revokes their own token reads
-- the result). Every name is qualified: it runs as the owner with the
-- caller's search_path.
CREATE OR REPLACE FUNCTION compass_credential_workspace() RETURNS uuid
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
DECLARE
  ws pg_catalog.uuid;
BEGIN
  SELECT c.workspace_id INTO ws FROM public.credentials c
    WHERE c.token_hash OPERATOR(pg_catalog.=) pg_catalog.decode(
        pg_catalog.current_setting('compass.credential', true), 'hex')
      AND (c.revoked_at IS NULL OR c.revoked_at OPERATOR(pg_catalog.>=) pg_catalog.now())
      AND (c.expires_at IS NULL OR c.expires_at OPERATOR(pg_catalog.>) pg_catalog.now());
  RETURN ws;
END
$$;
REVOKE ALL ON FUNCTION compass_credential_workspace() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_credential_workspace() TO compass_app, compass_maintenance, compass_writer;
