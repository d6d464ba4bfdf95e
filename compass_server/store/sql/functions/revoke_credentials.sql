-- after: 0028

-- Revokes credentials of the asker's workspace: those named (`ids`), of the
-- kind named (NULL: any), or every one of `account` (with `kinds`) that
-- still signs in. An admin revokes any; anyone else only its own account's
-- sessions. Returns the ids revoked now.
CREATE OR REPLACE FUNCTION compass_revoke_credentials(
  ids uuid[], kinds text[], account uuid, live_only boolean
) RETURNS TABLE (id uuid)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  ws uuid := public.compass_asker_workspace();
  admin boolean := public.compass_asker_is_admin();
  own uuid := public.compass_asker_account();
BEGIN
  IF ws IS NULL THEN
    RAISE EXCEPTION 'no workspace to revoke in' USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF NOT admin AND (own IS NULL OR kinds IS DISTINCT FROM ARRAY['session']
                    OR (account IS NOT NULL AND account <> own)) THEN
    RAISE EXCEPTION 'only an admin of the workspace may do this'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN QUERY
    UPDATE public.credentials c SET revoked_at = now()
    WHERE c.workspace_id = ws
      AND (ids IS NULL OR c.id = ANY (ids))
      AND (kinds IS NULL OR c.kind = ANY (kinds))
      AND (account IS NULL OR c.account_id = account)
      AND (admin OR c.account_id = own)
      AND c.revoked_at IS NULL
      AND (NOT live_only OR c.expires_at IS NULL OR c.expires_at > now())
    RETURNING c.id;
END
$$;
REVOKE ALL ON FUNCTION compass_revoke_credentials(ids uuid[], kinds text[], account uuid, live_only boolean) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_revoke_credentials(ids uuid[], kinds text[], account uuid, live_only boolean) TO compass_app, compass_maintenance;
