-- after: 0016

-- The agent and every agent below it, with how far below.
CREATE OR REPLACE FUNCTION compass_subtree(agent uuid) RETURNS TABLE (id uuid, depth integer)
LANGUAGE sql STABLE AS $$
  WITH RECURSIVE below (id, depth) AS (
    SELECT agent, 0
    UNION ALL
    SELECT a.id, b.depth + 1 FROM accounts a JOIN below b ON a.parent_id = b.id
    WHERE b.depth < compass_max_agent_depth()
  )
  SELECT id, depth FROM below
$$;
REVOKE ALL ON FUNCTION compass_subtree(agent uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_subtree(agent uuid) TO PUBLIC;
