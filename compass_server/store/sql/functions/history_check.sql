-- after: 0025

-- What verify-history reads: every entry of one workspace, oldest first
-- per ask, with its hash recomputed from the stored hash of the entry
-- before it, and on each ask's last entry whether the ask still stands as
-- that entry recorded; then each ask with no entry at all (id NULL). The
-- operator's command calls it.
CREATE OR REPLACE FUNCTION compass_history_check(ws uuid)
RETURNS TABLE (id bigint, ask_id text, kind text, at timestamptz, holds boolean,
               last boolean, state_holds boolean)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
  SELECT c.id, c.ask_id, c.kind, c.at, c.entry_hash IS NOT DISTINCT FROM c.recomputed, c.last,
         NOT c.last OR c.state_digest IS NOT DISTINCT FROM
           sha256(convert_to(compass_ask_json(c.ask_id)::text, 'UTF8'))
  FROM (
    SELECT h.*, compass_history_hash(lag(h.entry_hash) OVER w, h) AS recomputed,
           lead(h.id) OVER w IS NULL AS last
    FROM ask_history h
    WHERE h.workspace_id = ws
    WINDOW w AS (PARTITION BY h.ask_id ORDER BY h.id)
  ) c
  UNION ALL
  -- An ask whose every entry is gone.
  SELECT NULL, a.ask_id, NULL, NULL, false, true, false
  FROM asks a
  WHERE a.workspace_id = ws
    AND NOT EXISTS (SELECT 1 FROM ask_history h WHERE h.ask_id = a.ask_id)
  ORDER BY 1 NULLS FIRST
$$;
REVOKE ALL ON FUNCTION compass_history_check(ws uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_history_check(ws uuid) TO compass_maintenance;
