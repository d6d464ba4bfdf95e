-- after: 0020

-- What one endpoint is owed: its deliveries still to send, and what the
-- events past its cursor will make; and since when the oldest of them waits.
CREATE OR REPLACE FUNCTION compass_webhook_owing(e webhook_endpoints, OUT owed bigint, OUT since timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT coalesce(d.n, 0) + coalesce(l.n, 0), least(d.since, l.since)
  FROM (SELECT count(*) AS n, min(created_at) AS since FROM webhook_deliveries
        WHERE endpoint_id = e.id AND state = 'pending') d,
       (SELECT sum(w.n) AS n, min(w.created_at) FILTER (WHERE w.n > 0) AS since
        FROM (SELECT compass_webhook_owed(ev.kind, ev.payload, e.event_types) AS n, ev.created_at
              FROM events ev
              WHERE e.enabled AND ev.workspace_id = e.workspace_id AND ev.id > e.event_cursor)
             AS w) l
$$;
REVOKE ALL ON FUNCTION compass_webhook_owing(e webhook_endpoints, OUT owed bigint, OUT since timestamp with time zone) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_webhook_owing(e webhook_endpoints, OUT owed bigint, OUT since timestamp with time zone) TO PUBLIC;
