-- A server leaving ends every session it still holds, with its row, in one
-- transaction: a stop cut short before its streams unbound would otherwise
-- leave sessions that nothing reaps (the reaper finds sessions through their
-- server's row), and their agents present for good. Also how a stopping
-- server ends thousands of sessions at once rather than one by one.
CREATE FUNCTION compass_end_server_sessions(server uuid)
RETURNS TABLE (workspace_id uuid, agent_id uuid)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  change jsonb;
BEGIN
  FOR workspace_id, agent_id IN
    WITH gone AS (
      DELETE FROM agent_sessions s WHERE s.server_id = server
      RETURNING s.workspace_id, s.agent_id
    )
    SELECT DISTINCT g.workspace_id, g.agent_id FROM gone g ORDER BY 1, 2
  LOOP
    change := compass_presence_change(agent_id);
    IF change IS NOT NULL THEN
      PERFORM compass_append_events_to(
        workspace_id, ARRAY['presence_changed'], ARRAY[NULL::uuid], ARRAY[change]);
    END IF;
    RETURN NEXT;
  END LOOP;
END
$$;
REVOKE ALL ON FUNCTION compass_end_server_sessions(uuid) FROM PUBLIC, compass_app;
GRANT EXECUTE ON FUNCTION compass_end_server_sessions(uuid) TO compass_maintenance;

-- The reaper ends a silent server's sessions the same way, one server at a time.
CREATE OR REPLACE FUNCTION compass_reap_stale_sessions(stale interval)
RETURNS TABLE (workspace_id uuid, agent_id uuid)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  dead uuid;
BEGIN
  FOR dead IN DELETE FROM servers WHERE heartbeat_at < now() - stale RETURNING id LOOP
    RETURN QUERY SELECT * FROM compass_end_server_sessions(dead);
  END LOOP;
END
$$;

-- Delivery cursors saved together by a stopping server, across workspaces:
-- each only moves forward.
CREATE FUNCTION compass_save_cursors(agent_ids uuid[], event_ids bigint[])
RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
  UPDATE delivery_cursors d SET acked_event_id = greatest(d.acked_event_id, x.event_id)
  FROM unnest(agent_ids, event_ids) AS x (agent_id, event_id)
  WHERE d.agent_id = x.agent_id
$$;
REVOKE ALL ON FUNCTION compass_save_cursors(uuid[], bigint[]) FROM PUBLIC, compass_app;
GRANT EXECUTE ON FUNCTION compass_save_cursors(uuid[], bigint[]) TO compass_maintenance;
