-- after: 0015

-- Endpoints whose cursor is behind their workspace's log, for the servers to
-- make deliveries from; at most max_rows, oldest cursor first.
CREATE OR REPLACE FUNCTION compass_webhook_backlog(max_rows integer)
RETURNS TABLE (workspace_id uuid, endpoint_id uuid)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT e.workspace_id, e.id FROM webhook_endpoints e
  JOIN event_counters c ON c.workspace_id = e.workspace_id
  WHERE e.enabled AND e.event_cursor < c.last_event_id
  ORDER BY e.event_cursor - c.last_event_id
  LIMIT max_rows
$$;
REVOKE ALL ON FUNCTION compass_webhook_backlog(max_rows integer) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_webhook_backlog(max_rows integer) TO compass_maintenance;
