-- The write functions' helpers keep their plans, and a write runs fewer statements.
--
-- A LANGUAGE sql function that can't be inlined (its body has a FROM) is
-- planned again on every call of every transaction: PL/pgSQL keeps the plan
-- for the session. pg_stat_statements and track_functions over the ask
-- lifecycle (bench/pg_profile.py) put compass_ask_json, called twice per
-- lifecycle by the history chain's trigger, at about ten times the cost of
-- the one statement it runs, and compass_voted, once per answer, at three
-- times. The same statements, the same results, planned once per connection.

CREATE OR REPLACE FUNCTION compass_ask_json(ask text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (
    SELECT b -> 'ask'
    FROM asks a
    JOIN messages m ON m.id = a.message_id,
    jsonb_array_elements(m.blocks) AS b
    WHERE a.ask_id = ask AND b ->> 'kind' = 'ask' AND b -> 'ask' ->> 'ask_id' = ask
    LIMIT 1);
END
$$;

CREATE OR REPLACE FUNCTION compass_voted(stored jsonb, actor uuid) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN (
    SELECT v ->> 'kind' FROM jsonb_array_elements(coalesce(stored -> 'quorum_votes', '[]')) v
    WHERE v ->> 'account_id' = actor::text
    LIMIT 1);
END
$$;

-- Fewer statements per write, the same effects in the same order. The scope
-- names the credential and the actor in one statement before it proves them.
CREATE OR REPLACE FUNCTION compass_writer_scope(cred bytea, actor uuid) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
  ws uuid;
BEGIN
  PERFORM set_config('compass.credential', encode(cred, 'hex'), true),
          set_config('compass.actor', coalesce(actor::text, ''), true);
  ws := compass_credential_workspace();
  PERFORM set_config('compass.writer_workspace', coalesce(ws::text, ''), true);
  RETURN ws;
END
$$;

-- A write holding the counter inserts its events, moves the counter and
-- notifies in one statement (three before): they are independent, and the
-- counter's row is already locked by this transaction.
CREATE OR REPLACE FUNCTION compass_append_events_to(
  ws uuid, kinds text[], channel_ids uuid[], payloads jsonb[]
)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  last_id bigint;
  n int := coalesce(array_length(kinds, 1), 0);
  notified int;
BEGIN
  IF n = 0 THEN
    RETURN NULL;
  END IF;
  SELECT c.last_event_id INTO last_id FROM event_counters c
    WHERE c.workspace_id = ws FOR NO KEY UPDATE SKIP LOCKED;
  IF NOT FOUND THEN
    INSERT INTO events (workspace_id, kind, channel_id, payload)
      SELECT ws, k, c, p FROM unnest(kinds, channel_ids, payloads) AS x (k, c, p);
    RETURN NULL;
  END IF;
  last_id := compass_number_pending(ws, last_id);
  WITH appended AS (
    INSERT INTO events (workspace_id, id, kind, channel_id, payload)
      SELECT ws, last_id + x.i, x.k, x.c, x.p
      FROM unnest(kinds, channel_ids, payloads) WITH ORDINALITY AS x (k, c, p, i)
  ), moved AS (
    UPDATE event_counters SET last_event_id = last_id + n WHERE workspace_id = ws
    RETURNING last_event_id
  )
  SELECT count(pg_notify('compass_events', ws::text || ':' || moved.last_event_id::text))
    INTO notified FROM moved;
  RETURN last_id + n;
END
$$;
