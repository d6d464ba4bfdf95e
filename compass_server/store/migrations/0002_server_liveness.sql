-- Servers that stopped heartbeating are removed with their sessions, across
-- every workspace; the caller recomputes presence for the agents returned,
-- each in its own workspace's scope.
CREATE FUNCTION compass_reap_stale_sessions(stale interval)
RETURNS TABLE (workspace_id uuid, agent_id uuid)
LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
  WITH dead AS (
    DELETE FROM servers WHERE heartbeat_at < now() - stale RETURNING id
  )
  DELETE FROM agent_sessions s USING dead WHERE s.server_id = dead.id
  RETURNING s.workspace_id, s.agent_id
$$;
REVOKE ALL ON FUNCTION compass_reap_stale_sessions(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_reap_stale_sessions(interval) TO compass_app;
