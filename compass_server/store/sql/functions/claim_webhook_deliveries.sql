-- after: 0015

-- Claims deliveries due, fair across workspaces and endpoints, of endpoints of
-- the given kinds only: a server with no mail relay leaves email deliveries
-- to those with one, rather than spending their retries.
CREATE OR REPLACE FUNCTION compass_claim_webhook_deliveries(
  server uuid, lease interval, max_rows integer, per_endpoint integer, per_workspace integer,
  busy_ids uuid[], busy_counts integer[], busy_workspaces uuid[], busy_workspace_counts integer[],
  kinds text[]
)
RETURNS TABLE (
  delivery_id uuid, workspace_id uuid, endpoint_id uuid, attempt integer, failures integer,
  event_type text, body text, kind text, url_sealed bytea, secret_sealed bytea,
  previous_secret_sealed bytea
)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
  RETURN QUERY
  WITH ws_busy AS (
    SELECT w.id, w.n FROM unnest(busy_workspaces, busy_workspace_counts) AS w (id, n)
  ), room AS (
    SELECT e.id, e.workspace_id, coalesce(b.n, 0) AS busy,
           greatest(0, per_endpoint - coalesce(b.n, 0)) AS n
    FROM webhook_endpoints e
    LEFT JOIN unnest(busy_ids, busy_counts) AS b (id, n) ON b.id = e.id
    LEFT JOIN ws_busy wb ON wb.id = e.workspace_id
    WHERE e.enabled AND e.kind = ANY(kinds) AND coalesce(wb.n, 0) < per_workspace
    ORDER BY random()
  ), picked AS (
    SELECT d.id, room.id AS endpoint_id, room.workspace_id, room.busy, d.failures,
           d.next_attempt_at
    FROM room
    CROSS JOIN LATERAL (
      SELECT d.id, d.failures, d.next_attempt_at FROM webhook_deliveries d
      WHERE d.endpoint_id = room.id AND d.state = 'pending' AND d.next_attempt_at <= now()
      ORDER BY d.next_attempt_at
      LIMIT room.n
      FOR UPDATE SKIP LOCKED
    ) d
    -- Enough to fill every workspace's share; what isn't chosen stays due.
    LIMIT greatest(max_rows, 1) * 4
  ), by_endpoint AS (
    SELECT p.*,
           bool_or(p.failures > 0) OVER (PARTITION BY p.endpoint_id) AS failing,
           row_number() OVER (PARTITION BY p.endpoint_id ORDER BY p.next_attempt_at) AS ke
    FROM picked p
  ), by_workspace AS (
    SELECT x.id, x.workspace_id,
           row_number() OVER (
             PARTITION BY x.workspace_id ORDER BY x.failing, x.ke, x.next_attempt_at
           ) AS kw
    FROM by_endpoint x
    WHERE NOT x.failing OR x.ke + x.busy <= 1
  ), chosen AS (
    SELECT y.id FROM by_workspace y
    LEFT JOIN ws_busy wb ON wb.id = y.workspace_id
    WHERE y.kw + coalesce(wb.n, 0) <= per_workspace
    ORDER BY y.kw, random()
    LIMIT max_rows
  ), claimed AS (
    UPDATE webhook_deliveries d
    SET attempts = d.attempts + 1, next_attempt_at = now() + lease
    FROM chosen WHERE d.id = chosen.id
    RETURNING d.*
  ), cut AS (
    UPDATE webhook_attempts a
    SET finished_at = now(), error = 'the server sending it stopped before it finished'
    FROM claimed c WHERE a.delivery_id = c.id AND a.finished_at IS NULL
  ), started AS (
    INSERT INTO webhook_attempts (workspace_id, delivery_id, n, server_id)
    SELECT c.workspace_id, c.id, c.attempts, server FROM claimed c
  )
  SELECT c.id, c.workspace_id, c.endpoint_id, c.attempts, c.failures, c.event_type, c.body,
         e.kind, e.url_sealed, e.secret_sealed,
         CASE WHEN e.previous_until > now() THEN e.previous_secret_sealed END
  FROM claimed c JOIN webhook_endpoints e ON e.id = c.endpoint_id;
END
$$;
REVOKE ALL ON FUNCTION compass_claim_webhook_deliveries(server uuid, lease interval, max_rows integer, per_endpoint integer, per_workspace integer, busy_ids uuid[], busy_counts integer[], busy_workspaces uuid[], busy_workspace_counts integer[], kinds text[]) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_claim_webhook_deliveries(server uuid, lease interval, max_rows integer, per_endpoint integer, per_workspace integer, busy_ids uuid[], busy_counts integer[], busy_workspaces uuid[], busy_workspace_counts integer[], kinds text[]) TO compass_maintenance;
