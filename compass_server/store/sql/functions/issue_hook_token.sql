-- after: 0047

-- A hook token for an agent of the admin's workspace: it posts the agent's
-- hooks' asks in `channel` under `policy`, and signs in nowhere else.
-- Returns 'issued', or why not: 'no_agent' (no agent of the workspace by
-- that id), 'no_channel', 'not_in_channel' (the agent takes no part in it).
CREATE OR REPLACE FUNCTION compass_issue_hook_token(
  token_hash bytea, id uuid, agent uuid, channel uuid, policy jsonb, label text,
  expires_in interval
) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  ws uuid := public.compass_admin_workspace();
BEGIN
  IF NOT EXISTS (SELECT 1 FROM public.accounts a
                 WHERE a.id = compass_issue_hook_token.agent AND a.workspace_id = ws
                   AND a.kind = 'agent') THEN
    RETURN 'no_agent';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM public.channels c
                 WHERE c.id = compass_issue_hook_token.channel AND c.workspace_id = ws) THEN
    RETURN 'no_channel';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM public.compass_participation_of(compass_issue_hook_token.agent) p
                 WHERE p.channel_id = compass_issue_hook_token.channel) THEN
    RETURN 'not_in_channel';
  END IF;
  INSERT INTO public.credentials (token_hash, id, workspace_id, account_id, label, expires_at,
                                  kind)
  VALUES (compass_issue_hook_token.token_hash, compass_issue_hook_token.id, ws,
          compass_issue_hook_token.agent, compass_issue_hook_token.label,
          now() + compass_issue_hook_token.expires_in, 'hook');
  INSERT INTO public.hook_tokens (credential_id, workspace_id, channel_id, policy)
  VALUES (compass_issue_hook_token.id, ws, compass_issue_hook_token.channel,
          compass_issue_hook_token.policy);
  RETURN 'issued';
END
$$;
REVOKE ALL ON FUNCTION compass_issue_hook_token(token_hash bytea, id uuid, agent uuid, channel uuid, policy jsonb, label text, expires_in interval) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_issue_hook_token(token_hash bytea, id uuid, agent uuid, channel uuid, policy jsonb, label text, expires_in interval) TO compass_app, compass_maintenance;
