-- after: 0001

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
REVOKE ALL ON FUNCTION compass_reap_stale_sessions(stale interval) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_reap_stale_sessions(stale interval) TO compass_maintenance;
