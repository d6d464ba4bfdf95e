-- after: 0028

-- A token for an account or a runner of the admin's workspace.
CREATE OR REPLACE FUNCTION compass_issue_token(
  token_hash bytea, id uuid, account_id uuid, runner_id uuid, label text, expires_in interval
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  ws uuid := public.compass_admin_workspace();
BEGIN
  INSERT INTO public.credentials (token_hash, id, workspace_id, account_id, runner_id, label,
                                  expires_at)
  VALUES (compass_issue_token.token_hash, compass_issue_token.id, ws,
          compass_issue_token.account_id, compass_issue_token.runner_id,
          compass_issue_token.label, now() + compass_issue_token.expires_in);
END
$$;
REVOKE ALL ON FUNCTION compass_issue_token(token_hash bytea, id uuid, account_id uuid, runner_id uuid, label text, expires_in interval) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_issue_token(token_hash bytea, id uuid, account_id uuid, runner_id uuid, label text, expires_in interval) TO compass_app, compass_maintenance;
