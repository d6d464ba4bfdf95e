-- after: 0017

-- /metrics: the same, over every workspace.
CREATE OR REPLACE FUNCTION compass_webhook_metrics()
RETURNS TABLE (pending_deliveries bigint, oldest_pending_seconds double precision)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  SELECT coalesce(sum(o.owed), 0)::bigint,
         coalesce(extract(epoch FROM now() - min(o.since)), 0)::double precision
    FROM webhook_endpoints e, compass_webhook_owing(e) o
$$;
REVOKE ALL ON FUNCTION compass_webhook_metrics() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_webhook_metrics() TO compass_maintenance;
