-- Each event is written once, numbered as its transaction commits.
--
-- Until now a write numbered its events itself only when the workspace's
-- counter was free; otherwise it inserted them unnumbered and a numbering
-- transaction after its commit rewrote each row with its id: a second write
-- of the whole payload, its index entries and WAL (38 % of events at 16
-- writers), and a numbering transaction that mostly waited for the counter.
--
-- Now a write stages its events in the transaction (compass_append_events_to)
-- and a deferred trigger appends them as it commits: it takes each staged
-- workspace's counter, inserts the events numbered, and notifies. Taking the
-- counter is the last thing a transaction does, so the counter is held only
-- for the commit's tail and its holder waits on nothing else: writes whose
-- commits meet queue for that long, never for a whole transaction, and two
-- can't deadlock over it (workspaces are taken in one order). Order stays
-- causal as before: a write that waited on another's lock commits after it.
-- Readers still read `id > cursor`: ids are handed out and committed under
-- the counter.
--
-- The staged events live in the transaction's own settings (compass.staged_N,
-- chunks of one JSON document per append), so they touch no table before
-- their one insert, vanish with a rolled-back savepoint, and a transaction of
-- thousands of appends copies at most a chunk per append. A row per staged
-- workspace in event_flushes fires the trigger at commit, and the trigger
-- appends only to the workspaces of this transaction's rows: their row-level
-- security holds a caller to its own workspace, as the insert into events
-- did, however it wrote the settings.

CREATE UNLOGGED TABLE event_flushes (
  -- The transaction's own rows are found by it, not among every dead row
  -- of a busy workspace.
  xact xid8 NOT NULL DEFAULT pg_current_xact_id(),
  workspace_id uuid NOT NULL
);
ALTER TABLE event_flushes ENABLE ROW LEVEL SECURITY;
CREATE POLICY workspace_only ON event_flushes TO compass_app, compass_maintenance, compass_writer
  USING (workspace_id = (SELECT compass_workspace()))
  WITH CHECK (workspace_id = (SELECT compass_workspace()));
CREATE INDEX event_flushes_xact ON event_flushes (xact, workspace_id);
GRANT INSERT ON event_flushes TO compass_app, compass_maintenance, compass_writer;

-- Returns 0 once staged (NULL for nothing): the events are numbered by the
-- time anyone sees the commit, so nothing is left to number after it.
CREATE OR REPLACE FUNCTION compass_append_events_to(
  ws uuid, kinds text[], channel_ids uuid[], payloads jsonb[]
)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  chunks int := coalesce(nullif(current_setting('compass.staged_chunks', true), ''), '0')::int;
  staged text := coalesce(current_setting('compass.staged_workspaces', true), '');
  doc text;
  chunk text;
BEGIN
  IF coalesce(array_length(kinds, 1), 0) = 0 THEN
    RETURN NULL;
  END IF;
  doc := jsonb_build_object('w', ws, 'k', kinds, 'c', channel_ids, 'p', payloads)::text;
  IF chunks > 0 THEN
    chunk := current_setting('compass.staged_' || chunks);
  END IF;
  IF chunks = 0 OR length(chunk) >= 65536 THEN
    PERFORM set_config('compass.staged_chunks', (chunks + 1)::text, true),
      set_config('compass.staged_' || (chunks + 1), doc, true);
  ELSE
    PERFORM set_config('compass.staged_' || chunks, chunk || E'\n' || doc, true);
  END IF;
  -- After staging: a trigger made immediate (SET CONSTRAINTS) finds them.
  IF strpos(staged, ws::text) = 0 THEN
    PERFORM set_config('compass.staged_workspaces', staged || ws::text || ' ', true);
    INSERT INTO event_flushes (workspace_id) VALUES (ws);
  END IF;
  RETURN 0;
END
$$;

-- Appends every staged event, numbered; the first firing of a transaction
-- does it all, the others find nothing staged.
CREATE FUNCTION compass_flush_events() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  chunks int := coalesce(nullif(current_setting('compass.staged_chunks', true), ''), '0')::int;
  texts text := current_setting('compass.staged_1', true);
  docs jsonb[];
  ws uuid;
  last_id bigint;
  n bigint;
BEGIN
  IF chunks = 0 THEN
    -- A later firing, or a row written with nothing staged: it goes too.
    DELETE FROM event_flushes f WHERE f.xact = pg_current_xact_id();
    RETURN NULL;
  END IF;
  PERFORM set_config('compass.staged_chunks', '', true),
    set_config('compass.staged_workspaces', '', true);
  FOR i IN 2 .. chunks LOOP
    texts := texts || E'\n' || current_setting('compass.staged_' || i);
  END LOOP;
  docs := ARRAY(SELECT d::jsonb FROM string_to_table(texts, E'\n') WITH ORDINALITY AS t (d, j)
                ORDER BY j);
  -- Workspaces in one order, so two transactions can't deadlock over them.
  FOR ws, n IN
    SELECT (x ->> 'w')::uuid, sum(jsonb_array_length(x -> 'p')) FROM unnest(docs) AS x
    GROUP BY 1 ORDER BY 1
  LOOP
    -- Settings are the caller's to write: only a workspace its row was
    -- allowed for has its events appended.
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
REVOKE ALL ON FUNCTION compass_flush_events() FROM PUBLIC;

CREATE CONSTRAINT TRIGGER event_flushes_at_commit AFTER INSERT ON event_flushes
  DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION compass_flush_events();

-- What writes of the release before left unnumbered. Its servers still call
-- compass_number_events and compass_sequence_leftovers, which find nothing.
SELECT compass_sequence_leftovers();
