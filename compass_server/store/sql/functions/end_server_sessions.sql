-- after: 0039

-- A server leaving ends every session it still holds, with its row, in one
-- transaction: a stop cut short before its streams unbound would otherwise
-- leave sessions that nothing reaps (the reaper finds sessions through their
-- server's row), and their agents present for good. Also how a stopping
-- server ends thousands of sessions at once rather than one by one.
CREATE OR REPLACE FUNCTION compass_end_server_sessions(server uuid)
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
REVOKE ALL ON FUNCTION compass_end_server_sessions(server uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_end_server_sessions(server uuid) TO compass_maintenance;
