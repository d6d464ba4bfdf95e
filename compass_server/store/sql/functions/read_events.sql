-- after: 0011

-- The event log is read in pages bounded by bytes as well as by count: a
-- reader never holds more than a page, however large the events. Sizes are
-- of the payload as text (UTF-8 JSON) and are worked out only for the rows
-- returned, plus the one that ends the page.
CREATE OR REPLACE FUNCTION compass_read_events(after bigint, max_rows integer, max_bytes bigint)
RETURNS TABLE (
  id bigint, kind text, channel_id uuid, payload jsonb, created_at timestamptz, size integer
)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  total bigint := 0;
BEGIN
  FOR id, kind, channel_id, payload, created_at IN
    SELECT e.id, e.kind, e.channel_id, e.payload, e.created_at FROM events e
    WHERE e.workspace_id = compass_workspace() AND e.id > after
    ORDER BY e.id LIMIT max_rows
  LOOP
    size := octet_length(payload::text);
    -- The first event always fits, so a page is never empty.
    EXIT WHEN total > 0 AND total + size > max_bytes;
    total := total + size;
    RETURN NEXT;
  END LOOP;
END
$$;
REVOKE ALL ON FUNCTION compass_read_events(after bigint, max_rows integer, max_bytes bigint) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_read_events(after bigint, max_rows integer, max_bytes bigint) TO PUBLIC;
