-- after: 0014

-- What /metrics reads across workspaces: two counts, no row of any workspace.
-- Open asks are the agents' open-ask counts (channel and inbox, as WAITING
-- counts them); unnumbered events are committed writes whose numbering is
-- still to run.
CREATE OR REPLACE FUNCTION compass_metrics() RETURNS TABLE (open_asks bigint, unnumbered_events bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  SELECT (SELECT coalesce(sum(a.open_asks), 0)::bigint FROM accounts a),
         (SELECT count(*) FROM events e WHERE e.id IS NULL)
$$;
REVOKE ALL ON FUNCTION compass_metrics() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_metrics() TO compass_maintenance;
