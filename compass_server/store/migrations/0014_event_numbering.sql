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

-- The write that finds the counter free numbers what is pending (if any)
-- before its own events, without a separate probe for them.
CREATE OR REPLACE FUNCTION compass_append_events_to(
  ws uuid, kinds text[], channel_ids uuid[], payloads jsonb[]
)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  last_id bigint;
  n int := coalesce(array_length(kinds, 1), 0);
BEGIN
  IF n = 0 THEN
    RETURN NULL;
  END IF;
  SELECT c.last_event_id INTO last_id FROM event_counters c
    WHERE c.workspace_id = ws FOR NO KEY UPDATE SKIP LOCKED;
  IF NOT FOUND THEN
    INSERT INTO events (workspace_id, kind, channel_id, payload)
      SELECT ws, k, c, p FROM unnest(kinds, channel_ids, payloads) AS x (k, c, p);
    RETURN NULL;
  END IF;
  last_id := compass_number_pending(ws, last_id);
  INSERT INTO events (workspace_id, id, kind, channel_id, payload)
    SELECT ws, last_id + x.i, x.k, x.c, x.p
    FROM unnest(kinds, channel_ids, payloads) WITH ORDINALITY AS x (k, c, p, i);
  last_id := last_id + n;
  UPDATE event_counters SET last_event_id = last_id WHERE workspace_id = ws;
  PERFORM pg_notify('compass_events', ws::text || ':' || last_id::text);
  RETURN last_id;
END
$$;

-- The leftover sweep finds workspaces with pending events through their
-- index, not by reading the whole log on every heartbeat.
ALTER FUNCTION compass_sequence_leftovers() SET enable_seqscan = off;
