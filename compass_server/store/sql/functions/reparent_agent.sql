-- after: 0016

-- Moves an agent under another (NULL: makes it a root), with the agents
-- below it. Refused while it or an agent below it has an open channel ask:
-- an ask stays in the channel it was asked in, where the agent may no longer
-- be. Returns {status: moved | unchanged | no_agent}.
CREATE OR REPLACE FUNCTION compass_reparent_agent(agent uuid, parent uuid) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  moved accounts%ROWTYPE;
  asking accounts%ROWTYPE;
  last_id bigint;
BEGIN
  SELECT * INTO moved FROM accounts WHERE id = agent AND kind = 'agent';
  IF NOT FOUND THEN
    RETURN jsonb_build_object('status', 'no_agent');
  END IF;
  -- Before any row lock, as every tree change takes them.
  PERFORM compass_lock_trees(moved.owner_id);
  -- Locks the agent and (through the cascade) every agent below it, after
  -- any post of theirs in flight.
  UPDATE accounts SET parent_id = parent WHERE id = agent AND parent_id IS DISTINCT FROM parent;
  IF NOT FOUND THEN
    RETURN jsonb_build_object('status', 'unchanged');
  END IF;
  SELECT a.* INTO asking FROM accounts a
    WHERE a.id IN (SELECT s.id FROM compass_subtree(agent) s) AND a.open_asks > 0
    ORDER BY a.handle LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'agent % has % open asks', asking.handle, asking.open_asks
      USING ERRCODE = 'CT006', DETAIL = jsonb_build_object(
        'handle', asking.handle, 'open_asks', asking.open_asks)::text;
  END IF;
  last_id := compass_append_events(ARRAY['agent_moved'], ARRAY[NULL::uuid],
    ARRAY[jsonb_build_object('account_id', agent, 'parent_id', parent)]);
  RETURN jsonb_build_object('status', 'moved', 'numbered', last_id IS NOT NULL);
END
$$;
REVOKE ALL ON FUNCTION compass_reparent_agent(agent uuid, parent uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_reparent_agent(agent uuid, parent uuid) TO PUBLIC;
