-- after: 0012

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
    chunks := chunks + 1;
    chunk := doc;
  ELSE
    chunk := chunk || E'\n' || doc;
  END IF;
  IF strpos(staged, ws::text) = 0 THEN
    -- The workspace's first events of the transaction: staged, then its
    -- marker row, in one statement (a trigger made immediate, SET
    -- CONSTRAINTS, finds them staged).
    INSERT INTO event_flushes (workspace_id)
      SELECT ws
      WHERE set_config('compass.staged_chunks', chunks::text, true) IS NOT NULL
        AND set_config('compass.staged_' || chunks, chunk, true) IS NOT NULL
        AND set_config('compass.staged_workspaces', staged || ws::text || ' ', true) IS NOT NULL;
  ELSE
    PERFORM set_config('compass.staged_chunks', chunks::text, true),
      set_config('compass.staged_' || chunks, chunk, true);
  END IF;
  RETURN 0;
END
$$;
REVOKE ALL ON FUNCTION compass_append_events_to(ws uuid, kinds text[], channel_ids uuid[], payloads jsonb[]) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_append_events_to(ws uuid, kinds text[], channel_ids uuid[], payloads jsonb[]) TO PUBLIC;
