-- A delivery lane catching up reads only the events that may be its own:
-- those naming one of its keys (its channels, the accounts of its chain), as
-- the event hub's index wakes it by (events.hub.event_keys). Each event's
-- keys are kept with it and indexed, so that a lane far behind reads what
-- names it, however many events of others lie in between.
CREATE FUNCTION compass_event_keys(kind text, channel_id uuid, payload jsonb)
RETURNS uuid[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT array_remove(
    ARRAY[
      channel_id,
      CASE kind
        WHEN 'inbox_item_changed' THEN (payload ->> 'agent_id')::uuid
        WHEN 'message_updated' THEN (payload ->> 'author_id')::uuid
        WHEN 'agent_moved' THEN (payload ->> 'account_id')::uuid
      END
    ] || CASE
      WHEN kind = 'channel_changed'
        THEN ARRAY(SELECT m::uuid FROM jsonb_array_elements_text(payload -> 'member_ids') AS m)
      ELSE '{}'::uuid[]
    END,
    NULL
  )
$$;

ALTER TABLE events
  ADD COLUMN keys uuid[] GENERATED ALWAYS AS (compass_event_keys(kind, channel_id, payload)) STORED;
CREATE INDEX events_keys ON events USING gin (keys);

-- The ids of the events after `after` naming one of lane_keys, oldest
-- first, in the caller's workspace. Run as the tables' owner: under row
-- security a condition with an operator that is not leakproof (&& is not)
-- can't be an index condition, and the keys' index would never be used;
-- the workspace is the caller's credential's, as row security has it. The
-- matches are found first and ordered after: asked for in id order with a
-- limit, the planner walks every id after the cursor hoping to meet a match
-- early, which for a lane among thousands it seldom does.
CREATE FUNCTION compass_lane_event_ids(after bigint, lane_keys uuid[], max_rows integer)
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
REVOKE ALL ON FUNCTION compass_lane_event_ids(bigint, uuid[], integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_lane_event_ids(bigint, uuid[], integer) TO compass_app;

-- The events after `after` naming one of lane_keys, oldest first: at most
-- max_rows, and no more than max_bytes together (the first always fits).
-- A last row with no kind says how far the read went: every event up to its
-- id was returned or names none of the keys.
CREATE FUNCTION compass_read_lane_events(
  after bigint, lane_keys uuid[], max_rows integer, max_bytes bigint
)
RETURNS TABLE (
  id bigint, kind text, channel_id uuid, payload jsonb, created_at timestamptz, size integer
)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  ids bigint[] := ARRAY(SELECT compass_lane_event_ids(after, lane_keys, max_rows));
  total bigint := 0;
  n integer := 0;
  cut boolean := false;
  reached bigint;
BEGIN
  FOR id, kind, channel_id, payload, created_at IN
    SELECT e.id, e.kind, e.channel_id, e.payload, e.created_at FROM events e
    WHERE e.workspace_id = compass_workspace() AND e.id = ANY (ids)
    ORDER BY e.id
  LOOP
    size := octet_length(payload::text);
    IF total > 0 AND total + size > max_bytes THEN
      cut := true;
      EXIT;
    END IF;
    total := total + size;
    n := n + 1;
    reached := id;
    RETURN NEXT;
  END LOOP;
  IF NOT cut AND cardinality(ids) < max_rows THEN
    -- Every match there is was read: the lane has passed the log as this
    -- read sees it.
    SELECT greatest(c.last_event_id, after) INTO reached FROM event_counters c
      WHERE c.workspace_id = compass_workspace();
  END IF;
  id := coalesce(reached, after);
  kind := NULL;
  channel_id := NULL;
  payload := NULL;
  created_at := NULL;
  size := 0;
  RETURN NEXT;
END
$$;
