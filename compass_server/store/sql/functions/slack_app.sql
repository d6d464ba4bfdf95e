-- after: 0029

-- The app an interaction's team names, whichever workspace holds it.
CREATE OR REPLACE FUNCTION compass_slack_app(team text)
RETURNS TABLE (workspace_id uuid, endpoint_id uuid, token_sealed bytea, secret_sealed bytea,
               email_match boolean, enabled boolean)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT e.workspace_id, e.id, e.url_sealed, e.secret_sealed, e.slack_email_match, e.enabled
  FROM webhook_endpoints e WHERE e.kind = 'slack_app' AND e.slack_team_id = team
$$;
REVOKE ALL ON FUNCTION compass_slack_app(team text) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_slack_app(team text) TO compass_maintenance;
