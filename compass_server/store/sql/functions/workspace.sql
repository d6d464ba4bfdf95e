-- after: 0001

CREATE OR REPLACE FUNCTION compass_workspace() RETURNS uuid
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN current_user = 'compass_maintenance'
    THEN nullif(pg_catalog.current_setting('compass.operator_workspace', true), '')::uuid
    ELSE public.compass_credential_workspace()
  END
$$;
REVOKE ALL ON FUNCTION compass_workspace() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_workspace() TO PUBLIC;
