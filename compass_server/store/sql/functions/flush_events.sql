-- after: 0042

-- Appends every staged event, numbered; the first firing of a transaction
-- does it all, the others find nothing staged. A transaction's events of one
-- workspace (nearly all) go in one statement: the markers taken, the counter
-- moved, the events written, the listeners told. Several workspaces go one
-- at a time, in one order, so two transactions can't deadlock over them.
CREATE OR REPLACE FUNCTION compass_flush_events() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  chunks int := coalesce(nullif(current_setting('compass.staged_chunks', true), ''), '0')::int;
  texts text := current_setting('compass.staged_1', true);
  docs jsonb[];
  ws uuid;
  last_id bigint;
  n bigint;
  outcome text;
  cleared text;
  told bigint;
BEGIN
  IF chunks = 0 THEN
    -- A later firing, or a row written with nothing staged: it goes too.
    DELETE FROM event_flushes f WHERE f.xact = pg_current_xact_id();
    RETURN NULL;
  END IF;
  FOR i IN 2 .. chunks LOOP
    texts := texts || E'\n' || current_setting('compass.staged_' || i);
  END LOOP;
  IF chunks = 1 AND strpos(current_setting('compass.staged_workspaces', true), ' ') =
     length(current_setting('compass.staged_workspaces', true)) THEN
    WITH staged AS (
      SELECT d::jsonb AS x, j AS i
      FROM string_to_table(texts, E'\n') WITH ORDINALITY AS t (d, j)
    ), total AS (
      SELECT (min(x ->> 'w'))::uuid AS ws, count(DISTINCT x ->> 'w') AS workspaces,
             sum(jsonb_array_length(x -> 'p')) AS n
      FROM staged
    ), taken AS (
      -- Settings are the caller's to write: only a workspace its row was
      -- allowed for has its events appended.
      DELETE FROM event_flushes f USING total
      WHERE f.xact = pg_current_xact_id() AND f.workspace_id = total.ws
        AND total.workspaces = 1
      RETURNING f.workspace_id
    ), moved AS (
      UPDATE event_counters c SET last_event_id = c.last_event_id + total.n
      FROM total WHERE c.workspace_id = total.ws AND EXISTS (SELECT 1 FROM taken)
      RETURNING c.workspace_id, c.last_event_id - total.n AS last_id, total.n
    ), written AS (
      INSERT INTO events (workspace_id, id, kind, channel_id, payload)
      SELECT m.workspace_id, m.last_id + row_number() OVER (ORDER BY s.i, e.k),
        s.x -> 'k' ->> (e.k - 1)::int, (s.x -> 'c' ->> (e.k - 1)::int)::uuid, e.p
      FROM moved m, staged s, jsonb_array_elements(s.x -> 'p') WITH ORDINALITY AS e (p, k)
      RETURNING 1
    )
    SELECT CASE
             WHEN t.workspaces <> 1 THEN 'several'
             WHEN NOT EXISTS (SELECT 1 FROM taken) THEN 'unallowed'
             WHEN m.workspace_id IS NULL THEN 'no counter'
             ELSE 'written'
           END,
           t.ws,
           CASE WHEN m.workspace_id IS NOT NULL THEN
             set_config('compass.staged_chunks', '', true)
               || set_config('compass.staged_workspaces', '', true)
           END,
           CASE WHEN m.workspace_id IS NOT NULL THEN (
             SELECT count(*) FROM (
               SELECT pg_notify('compass_events',
                 m.workspace_id::text || ':' || (m.last_id + m.n)::text)) AS sent)
           END
      INTO outcome, ws, cleared, told
      FROM total t LEFT JOIN moved m ON true;
    IF outcome = 'unallowed' THEN
      RAISE EXCEPTION 'events staged for workspace % without its row', ws
        USING ERRCODE = 'insufficient_privilege';
    ELSIF outcome = 'no counter' THEN
      RAISE EXCEPTION 'workspace % has no event counter', ws;
    ELSIF outcome = 'written' THEN
      RETURN NULL;
    END IF;
    -- Docs naming another workspace than the one staged: the loop below
    -- refuses them as it refuses every workspace without its row.
  END IF;
  PERFORM set_config('compass.staged_chunks', '', true),
    set_config('compass.staged_workspaces', '', true);
  docs := ARRAY(SELECT d::jsonb FROM string_to_table(texts, E'\n') WITH ORDINALITY AS t (d, j)
                ORDER BY j);
  -- Workspaces in one order, so two transactions can't deadlock over them.
  FOR ws, n IN
    SELECT (x ->> 'w')::uuid, sum(jsonb_array_length(x -> 'p')) FROM unnest(docs) AS x
    GROUP BY 1 ORDER BY 1
  LOOP
    DELETE FROM event_flushes f WHERE f.xact = pg_current_xact_id() AND f.workspace_id = ws;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'events staged for workspace % without its row', ws
        USING ERRCODE = 'insufficient_privilege';
    END IF;
    UPDATE event_counters SET last_event_id = last_event_id + n WHERE workspace_id = ws
      RETURNING last_event_id - n INTO last_id;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'workspace % has no event counter', ws;
    END IF;
    INSERT INTO events (workspace_id, id, kind, channel_id, payload)
      SELECT ws, last_id + row_number() OVER (ORDER BY s.i, e.k),
        s.x -> 'k' ->> (e.k - 1)::int, (s.x -> 'c' ->> (e.k - 1)::int)::uuid, e.p
      FROM unnest(docs) WITH ORDINALITY AS s (x, i),
        jsonb_array_elements(s.x -> 'p') WITH ORDINALITY AS e (p, k)
      WHERE s.x ->> 'w' = ws::text;
    PERFORM pg_notify('compass_events', ws::text || ':' || (last_id + n)::text);
  END LOOP;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION compass_flush_events() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
