-- after: 0029

-- How an ask of workspace ws ended (its latest ending entry), for
-- telling a Slack user who clicked on it; no row while it is open.
CREATE OR REPLACE FUNCTION compass_slack_ending(ws uuid, ask text)
RETURNS TABLE (kind text, reason text, handle text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT h.kind, h.reason, a.handle FROM ask_history h LEFT JOIN accounts a ON a.id = h.actor_id
  WHERE h.ask_id = ask AND h.workspace_id = ws
    AND h.kind IN ('answered', 'declined', 'withdrawn_by_agent', 'withdrawn_by_owner', 'expired')
  ORDER BY h.id DESC LIMIT 1
$$;
REVOKE ALL ON FUNCTION compass_slack_ending(ws uuid, ask text) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_slack_ending(ws uuid, ask text) TO compass_maintenance;
