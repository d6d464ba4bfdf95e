-- after: 0001

-- The workspace a transaction is scoped to, as a set of one (or none) that
-- row-level security's policies read in their InitPlan: a set-returning SQL
-- function is inlined into the query that calls it, so a scope noted for
-- this transaction (compass_note_scope) is a join, not a statement. The
-- operator's (as maintenance), else the noted one, else (a transaction that
-- noted none: a server of the release before) its credential's, proved now.
CREATE OR REPLACE FUNCTION compass_workspace_now() RETURNS TABLE (w uuid)
LANGUAGE sql STABLE ROWS 1 AS $$
  SELECT CASE WHEN current_user = 'compass_maintenance'
    THEN nullif(pg_catalog.current_setting('compass.operator_workspace', true), '')::uuid
    ELSE coalesce(
      (SELECT s.workspace_id FROM public.compass_scopes s
       WHERE s.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
         AND s.at OPERATOR(pg_catalog.=) pg_catalog.now()),
      public.compass_credential_workspace())
  END
$$;
REVOKE ALL ON FUNCTION compass_workspace_now() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_workspace_now() TO PUBLIC;
