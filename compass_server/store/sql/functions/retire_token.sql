-- after: 0028

-- A rotation's old token: revoked now, or expiring when the grace ends.
CREATE OR REPLACE FUNCTION compass_retire_token(id uuid, replaced_by uuid, grace interval) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  ws uuid := public.compass_admin_workspace();
BEGIN
  UPDATE public.credentials c
  SET replaced_by = compass_retire_token.replaced_by,
      revoked_at = CASE WHEN grace > interval '0' THEN NULL ELSE now() END,
      expires_at = CASE WHEN grace > interval '0'
                        THEN least(coalesce(c.expires_at, 'infinity'), now() + grace)
                        ELSE c.expires_at END
  WHERE c.id = compass_retire_token.id AND c.workspace_id = ws;
END
$$;
REVOKE ALL ON FUNCTION compass_retire_token(id uuid, replaced_by uuid, grace interval) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_retire_token(id uuid, replaced_by uuid, grace interval) TO compass_app, compass_maintenance;
