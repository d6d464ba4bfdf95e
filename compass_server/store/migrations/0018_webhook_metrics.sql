-- What /metrics reads of the webhook deliveries across workspaces: how many
-- are still to be sent (due or waiting for a retry), and how long the oldest
-- of them has waited. No row of any workspace.
CREATE FUNCTION compass_webhook_metrics()
RETURNS TABLE (pending_deliveries bigint, oldest_pending_seconds double precision)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  SELECT count(*),
         coalesce(extract(epoch FROM now() - min(d.created_at)), 0)::double precision
    FROM webhook_deliveries d
   WHERE d.state = 'pending'
$$;
REVOKE ALL ON FUNCTION compass_webhook_metrics() FROM PUBLIC, compass_app;
GRANT EXECUTE ON FUNCTION compass_webhook_metrics() TO compass_maintenance;
