-- after: 0001

-- The workspace a transaction is scoped to: the operator's (as maintenance),
-- else the one compass_note_scope proved for this transaction, else (a
-- transaction that noted none: a server of the release before) its
-- credential's, proved now; NULL (no rows) otherwise. A SQL function, so
-- row-level security's InitPlan reads a noted scope as a join, with no
-- statement of its own.
CREATE OR REPLACE FUNCTION compass_workspace() RETURNS uuid
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN current_user = 'compass_maintenance'
    THEN nullif(pg_catalog.current_setting('compass.operator_workspace', true), '')::uuid
    ELSE coalesce(
      (SELECT s.workspace_id FROM public.compass_scopes s
       WHERE s.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
         AND s.at OPERATOR(pg_catalog.=) pg_catalog.now()),
      public.compass_credential_workspace())
  END
$$;
REVOKE ALL ON FUNCTION compass_workspace() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_workspace() TO PUBLIC;
