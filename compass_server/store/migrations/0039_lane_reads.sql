-- A delivery lane catching up reads only the events that may be its own:
-- those naming one of its keys (its channels, the accounts of its chain), as
-- the event hub's index wakes it by (events.hub.event_keys). Every other
-- event is passed in the database, unread by the server: a lane far behind
-- costs a scan of ids here, not the decoding of every event in between.
--
-- The rows heard come first, each no more than max_bytes together (the first
-- always fits); a last row with no kind says how far the scan went (at most
-- max_scan events): every event up to its id was returned or none of the lane's.
CREATE FUNCTION compass_read_lane_events(
  after bigint, lane_keys uuid[], max_rows integer, max_bytes bigint, max_scan integer
)
RETURNS TABLE (
  id bigint, kind text, channel_id uuid, payload jsonb, created_at timestamptz, size integer
)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  key_texts text[] := lane_keys::text[];
  total bigint := 0;
  n integer := 0;
  scanned bigint := after;
  r record;
BEGIN
  FOR r IN
    SELECT e.id AS eid, (
      e.channel_id = ANY (lane_keys)
      OR CASE e.kind
        WHEN 'inbox_item_changed' THEN (e.payload ->> 'agent_id')::uuid = ANY (lane_keys)
        WHEN 'message_updated' THEN (e.payload ->> 'author_id')::uuid = ANY (lane_keys)
        WHEN 'agent_moved' THEN (e.payload ->> 'account_id')::uuid = ANY (lane_keys)
        WHEN 'channel_changed' THEN e.payload -> 'member_ids' ?| key_texts
        ELSE false
      END
    ) AS heard
    FROM events e
    WHERE e.workspace_id = compass_workspace() AND e.id > after
    ORDER BY e.id LIMIT max_scan
  LOOP
    IF r.heard THEN
      SELECT e.kind, e.channel_id, e.payload, e.created_at
        INTO kind, channel_id, payload, created_at
        FROM events e WHERE e.workspace_id = compass_workspace() AND e.id = r.eid;
      size := octet_length(payload::text);
      EXIT WHEN total > 0 AND total + size > max_bytes;
      total := total + size;
      n := n + 1;
      id := r.eid;
      scanned := r.eid;
      RETURN NEXT;
      EXIT WHEN n >= max_rows;
    ELSE
      scanned := r.eid;
    END IF;
  END LOOP;
  id := scanned;
  kind := NULL;
  channel_id := NULL;
  payload := NULL;
  created_at := NULL;
  size := 0;
  RETURN NEXT;
END
$$;
