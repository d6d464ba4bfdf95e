-- after: 0010

-- Takes an agent away from a runner: removes the assignment (after any bind
-- of it in flight, which holds a key-share lock on the row), the sessions it
-- bound, and recomputes the agent's presence; every server hears it and
-- unbinds the sessions it holds. An agent not assigned changes nothing.
-- Returns how many sessions were bound and whether the presence moved (its
-- event is numbered after commit).
CREATE OR REPLACE FUNCTION compass_unassign_agent(runner uuid, agent uuid)
RETURNS TABLE (sessions integer, presence_changed boolean)
LANGUAGE plpgsql AS $$
DECLARE
  n integer;
BEGIN
  DELETE FROM runner_agents ra WHERE ra.runner_id = runner AND ra.agent_id = agent;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 0, false;
    RETURN;
  END IF;
  DELETE FROM agent_sessions s WHERE s.runner_id = runner AND s.agent_id = agent;
  GET DIAGNOSTICS n = ROW_COUNT;
  PERFORM pg_notify('compass_access', 'unassign:' || runner::text || ':' || agent::text);
  RETURN QUERY SELECT n, compass_refresh_presence(agent);
END
$$;
REVOKE ALL ON FUNCTION compass_unassign_agent(runner uuid, agent uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_unassign_agent(runner uuid, agent uuid) TO PUBLIC;
