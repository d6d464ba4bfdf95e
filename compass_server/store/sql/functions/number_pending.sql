-- after: 0006

-- Numbering the event log costs what it numbers, whatever the planner's
-- statistics say. A plan cached while the log was one page (statistics taken
-- then, a pool connection that numbered a few times) joined the pending
-- events to the log by a filter on every pair: 5,000 pending events took
-- 13 s, 20,000 minutes, and every reader of the workspace waited on them.
--
-- Now the pending ids are gathered once (through the unnumbered index: no
-- order is asked of that scan, so no walk of the whole log in id order can
-- serve it), sorted, and each is numbered by its primary key. With scans of
-- the whole log ruled out (the function's own setting), no statement here has
-- a plan whose work grows with anything but the events it numbers.
CREATE OR REPLACE FUNCTION compass_number_pending(ws uuid, last_id bigint) RETURNS bigint
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
DECLARE
  unsorted bigint[];
  pending bigint;
  n bigint := last_id;
BEGIN
  -- A statement after the counter's lock: its snapshot holds every commit before it.
  SELECT array_agg(e.ins) INTO unsorted FROM events e WHERE e.workspace_id = ws AND e.id IS NULL;
  IF unsorted IS NULL THEN
    RETURN last_id;
  END IF;
  FOREACH pending IN ARRAY (SELECT array_agg(i ORDER BY i) FROM unnest(unsorted) AS i) LOOP
    n := n + 1;
    UPDATE events SET id = n WHERE ins = pending;
  END LOOP;
  RETURN n;
END
$$;
REVOKE ALL ON FUNCTION compass_number_pending(ws uuid, last_id bigint) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_number_pending(ws uuid, last_id bigint) TO PUBLIC;
