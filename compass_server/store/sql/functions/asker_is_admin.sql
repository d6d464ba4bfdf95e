-- after: 0028

-- Whether whoever is asking may administer its workspace.
CREATE OR REPLACE FUNCTION compass_asker_is_admin() RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  SELECT CASE public.compass_asker_role()
    WHEN 'compass_maintenance'
      THEN nullif(current_setting('compass.operator_workspace', true), '') IS NOT NULL
    WHEN 'compass_app' THEN EXISTS (
      SELECT 1 FROM public.accounts a
      WHERE a.id = public.compass_asker_account() AND a.kind = 'human' AND a.role = 'admin'
        AND a.deactivated_at IS NULL)
    ELSE false
  END
$$;
REVOKE ALL ON FUNCTION compass_asker_is_admin() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_asker_is_admin() TO compass_app, compass_maintenance;
