-- after: 0041

-- Many lanes behind the log at once (a restart binds every session, each
-- from its saved cursor) ask together whether anything after their cursors
-- names them: one statement for a batch of lanes, where each lane's own read
-- was a transaction of its own. Most lanes have nothing and move to the head;
-- only those with a match read their events.
--
-- Lane i (1-based) is after afters[i] and hears the keys paired with i in
-- (lanes, lane_keys). Returns a row per lane with a match, and one row with
-- lane 0 and the log's head as this statement sees it: a lane without a
-- match has passed every event up to it. Run as the tables' owner for the
-- keys' index, in the caller's credential's workspace. The match is
-- compass_lane_event_ids's condition, written out: calling that function for
-- each lane was slower in the one run tried (recovery of 10,000 sessions
-- 31.8 s against 28.2-28.3 s); tests/test_lane_reads.py holds both to
-- event_keys.
CREATE OR REPLACE FUNCTION compass_lanes_with_events(afters bigint[], lanes integer[], lane_keys uuid[])
RETURNS TABLE (lane integer, head bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public
SET enable_indexscan = off
SET enable_seqscan = off
SET jit = off
AS $$
  SELECT DISTINCT x.lane, NULL::bigint
  FROM unnest(lanes, lane_keys) AS x (lane, key)
  WHERE EXISTS (
    SELECT 1 FROM events e
    WHERE e.workspace_id = compass_credential_workspace()
      AND e.keys && ARRAY[x.key] AND e.id > afters[x.lane]
  )
  UNION ALL
  SELECT 0, c.last_event_id FROM event_counters c
  WHERE c.workspace_id = compass_credential_workspace()
$$;
REVOKE ALL ON FUNCTION compass_lanes_with_events(afters bigint[], lanes integer[], lane_keys uuid[]) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_lanes_with_events(afters bigint[], lanes integer[], lane_keys uuid[]) TO compass_app;
