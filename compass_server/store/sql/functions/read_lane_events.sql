-- after: 0038

-- The events after `after` naming one of lane_keys, oldest first: at most
-- max_rows, and no more than max_bytes together (the first always fits).
-- A last row with no kind says how far the read went: every event up to its
-- id was returned or names none of the keys.
CREATE OR REPLACE FUNCTION compass_read_lane_events(
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
REVOKE ALL ON FUNCTION compass_read_lane_events(after bigint, lane_keys uuid[], max_rows integer, max_bytes bigint) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_read_lane_events(after bigint, lane_keys uuid[], max_rows integer, max_bytes bigint) TO PUBLIC;
