-- after: 0028

CREATE OR REPLACE FUNCTION compass_set_deactivated(id uuid, deactivated boolean) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  ws uuid := public.compass_admin_workspace();
BEGIN
  UPDATE public.accounts a
  SET deactivated_at = CASE WHEN compass_set_deactivated.deactivated THEN now() END
  WHERE a.id = compass_set_deactivated.id AND a.workspace_id = ws;
END
$$;
REVOKE ALL ON FUNCTION compass_set_deactivated(id uuid, deactivated boolean) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_set_deactivated(id uuid, deactivated boolean) TO compass_app, compass_maintenance;
