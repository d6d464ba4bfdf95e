-- after: 0038

-- The ids of the events after `after` naming one of lane_keys, oldest
-- first, in the caller's workspace. Run as the tables' owner: under row
-- security a condition with an operator that is not leakproof (&& is not)
-- can't be an index condition, and the keys' index would never be used;
-- the workspace is the caller's credential's, as row security has it. The
-- matches are found first and ordered after: asked for in id order with a
-- limit, the planner walks every id after the cursor hoping to meet a match
-- early, which for a lane among thousands it seldom does.
CREATE OR REPLACE FUNCTION compass_lane_event_ids(after bigint, lane_keys uuid[], max_rows integer)
RETURNS SETOF bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public
SET enable_indexscan = off
SET enable_seqscan = off
AS $$
  SELECT m.id FROM (
    SELECT e.id FROM events e
    WHERE e.workspace_id = compass_credential_workspace()
      AND e.keys && lane_keys AND e.id > after
    OFFSET 0
  ) m
  ORDER BY m.id LIMIT max_rows
$$;
ALTER FUNCTION compass_lane_event_ids(after bigint, lane_keys uuid[], max_rows integer) SET jit = off;
REVOKE ALL ON FUNCTION compass_lane_event_ids(after bigint, lane_keys uuid[], max_rows integer) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_lane_event_ids(after bigint, lane_keys uuid[], max_rows integer) TO compass_app;
