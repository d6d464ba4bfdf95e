-- after: 0028

CREATE OR REPLACE FUNCTION compass_admin_workspace() RETURNS uuid
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  ws uuid := public.compass_asker_workspace();
BEGIN
  IF ws IS NULL OR NOT public.compass_asker_is_admin() THEN
    RAISE EXCEPTION 'only an admin of the workspace may do this'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN ws;
END
$$;
REVOKE ALL ON FUNCTION compass_admin_workspace() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_admin_workspace() TO compass_app, compass_maintenance;
