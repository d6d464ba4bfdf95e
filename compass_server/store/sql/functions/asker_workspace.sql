-- after: 0028

-- The workspace of whoever is asking (NULL: none).
CREATE OR REPLACE FUNCTION compass_asker_workspace() RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  SELECT CASE public.compass_asker_role()
    WHEN 'compass_maintenance'
      THEN nullif(current_setting('compass.operator_workspace', true), '')::uuid
    WHEN 'compass_app' THEN public.compass_credential_workspace()
  END
$$;
REVOKE ALL ON FUNCTION compass_asker_workspace() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_asker_workspace() TO compass_app, compass_maintenance;
