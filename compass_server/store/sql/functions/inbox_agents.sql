-- after: 0002

-- The agents whose inboxes a viewer sees: its own, those it owns, those granted.
CREATE OR REPLACE FUNCTION compass_inbox_agents(viewer uuid) RETURNS SETOF uuid
LANGUAGE sql STABLE AS $$
  SELECT id FROM accounts WHERE kind = 'agent' AND (id = viewer OR owner_id = viewer)
  UNION
  SELECT agent_id FROM inbox_grants WHERE account_id = viewer
$$;
REVOKE ALL ON FUNCTION compass_inbox_agents(viewer uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_inbox_agents(viewer uuid) TO PUBLIC;
