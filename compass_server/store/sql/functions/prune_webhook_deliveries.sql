-- after: 0015

-- Finished deliveries older than `age` go, a batch at a time; returns how many.
CREATE OR REPLACE FUNCTION compass_prune_webhook_deliveries(age interval, batch integer) RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
  WITH gone AS (
    DELETE FROM webhook_deliveries WHERE id IN (
      SELECT id FROM webhook_deliveries WHERE finished_at < now() - age LIMIT batch)
    RETURNING 1
  )
  SELECT count(*)::integer FROM gone
$$;
REVOKE ALL ON FUNCTION compass_prune_webhook_deliveries(age interval, batch integer) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_prune_webhook_deliveries(age interval, batch integer) TO compass_maintenance;
