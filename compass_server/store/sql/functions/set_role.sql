-- after: 0028

CREATE OR REPLACE FUNCTION compass_set_role(id uuid, role text) RETURNS SETOF accounts
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  ws uuid := public.compass_admin_workspace();
BEGIN
  RETURN QUERY
    UPDATE public.accounts a SET role = compass_set_role.role
    WHERE a.id = compass_set_role.id AND a.workspace_id = ws
    RETURNING *;
END
$$;
REVOKE ALL ON FUNCTION compass_set_role(id uuid, role text) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_set_role(id uuid, role text) TO compass_app, compass_maintenance;
