-- after: 0012

-- A server ends a session it bound, when its runner unbinds it or its stream
-- ends, whatever became of the runner's credential meanwhile (a revoked
-- token ends the stream, and its sessions must still go). Only the calling
-- server's sessions, by id; the agent's presence is recomputed in its
-- workspace, which is returned when it moved.
CREATE OR REPLACE FUNCTION compass_end_session(server uuid, session uuid) RETURNS uuid
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  gone agent_sessions%ROWTYPE;
  change jsonb;
BEGIN
  DELETE FROM agent_sessions s WHERE s.id = session AND s.server_id = server RETURNING * INTO gone;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  change := compass_presence_change(gone.agent_id);
  IF change IS NULL THEN
    RETURN NULL;
  END IF;
  PERFORM compass_append_events_to(
    gone.workspace_id, ARRAY['presence_changed'], ARRAY[NULL::uuid], ARRAY[change]);
  RETURN gone.workspace_id;
END
$$;
REVOKE ALL ON FUNCTION compass_end_session(server uuid, session uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_end_session(server uuid, session uuid) TO compass_maintenance;
