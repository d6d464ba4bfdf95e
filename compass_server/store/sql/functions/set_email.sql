-- after: 0028

CREATE OR REPLACE FUNCTION compass_set_email(id uuid, email text) RETURNS SETOF uuid
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  ws uuid := public.compass_admin_workspace();
BEGIN
  RETURN QUERY
    UPDATE public.accounts a SET email = compass_set_email.email
    WHERE a.id = compass_set_email.id AND a.workspace_id = ws AND a.kind = 'human'
    RETURNING a.id;
END
$$;
REVOKE ALL ON FUNCTION compass_set_email(id uuid, email text) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_set_email(id uuid, email text) TO compass_app, compass_maintenance;
