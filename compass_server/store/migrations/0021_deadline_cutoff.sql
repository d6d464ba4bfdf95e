-- A deadline is a cutoff, decided under the ask message's row lock.
--
-- 1. An answer, a decline or a withdraw that holds the row at or after the
-- ask's deadline ends the ask as expired instead, and tells its caller so
-- (status 'expired', with the ask's message and events as any ending): the
-- database's clock at the lock decides, whichever server handled the call
-- and whether or not a sweep ran. An expiry, written by the sweep or by such
-- a call, is timed at the deadline itself, as readers show it before it is
-- written.
--
-- 2. A new deadline is announced on compass_deadlines (its epoch seconds),
-- in the transaction that posts it, so every server's expiry loop wakes for
-- the nearest one, not only the posting server's.
--
-- 3. Nothing rewrites an ask's content, by construction: the tables refuse
-- it, whatever function, trigger, rule or statement composed anywhere tries.
-- A message changes after its post only in its asks' server-owned state
-- (answered, cancelled, ending; each question's chosen options, custom text
-- and timed_out), and an ask that ended stays as it ended. An inbox
-- message's content never changes (an inbox ask's standing lives in its own
-- columns). compass_app writes messages only through the write functions,
-- so it holds no INSERT, UPDATE or DELETE on the table.
--
-- 4. What a webhook endpoint is owed counts the events of the log its
-- cursor hasn't reached yet, not only the deliveries a courier made of
-- them: with no courier running anywhere, the backlog still shows.

-- Whether the ask's deadline has passed by the clock now: a write that
-- waited for the row lock decides when it holds it, not when it began.
CREATE FUNCTION compass_ask_due(stored jsonb) RETURNS boolean
LANGUAGE sql VOLATILE AS $$
  SELECT stored ? 'deadline' AND (stored ->> 'deadline')::timestamptz <= clock_timestamp()
$$;

-- An ending written as in 0017, but an expiry is timed at the deadline.
CREATE OR REPLACE FUNCTION compass_write_ending(
  m messages, idx int, kind text, actor uuid, surface text, reason text,
  answered jsonb DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  stored jsonb := m.blocks -> idx -> 'ask';
  ask text := stored ->> 'ask_id';
  ended_at timestamptz := now();
  ending jsonb;
  asked jsonb;
  written messages%ROWTYPE;
BEGIN
  IF kind = 'expired' AND stored ? 'deadline' THEN
    ended_at := (stored ->> 'deadline')::timestamptz;
  END IF;
  ending := jsonb_strip_nulls(jsonb_build_object(
    'kind', kind, 'actor_id', actor,
    'actor_handle', (SELECT handle FROM accounts WHERE id = actor),
    'at', ended_at, 'surface', surface, 'reason', nullif(reason, '')));
  asked := stored || jsonb_build_object('ending', ending);
  IF kind = 'answered' THEN
    asked := asked || jsonb_build_object('questions', answered, 'answered', true);
  ELSIF kind IN ('withdrawn_by_agent', 'withdrawn_by_owner') THEN
    asked := asked || '{"cancelled": true}';
  ELSIF kind = 'expired' THEN
    asked := asked || jsonb_build_object('questions', (
      SELECT jsonb_agg(q || '{"timed_out": true}' ORDER BY i)
      FROM jsonb_array_elements(stored -> 'questions') WITH ORDINALITY AS x(q, i)));
  END IF;
  UPDATE messages SET blocks = jsonb_set(blocks, ARRAY[idx::text, 'ask'], asked)
    WHERE id = m.id RETURNING * INTO written;
  IF stored ? 'deadline' THEN
    UPDATE asks SET due_at = NULL WHERE ask_id = ask;
  END IF;
  INSERT INTO ask_history (workspace_id, ask_id, kind, actor_id, surface, reason, at)
    VALUES (m.workspace_id, ask, kind, actor, surface, coalesce(reason, ''), ended_at);
  RETURN compass_message_json(written, (SELECT handle FROM accounts WHERE id = m.author_id));
END
$$;

-- Expires a locked, open ask of workspace `ws`: its ending, the agent's
-- presence and the events. The one way an ask expires, for the sweep and
-- for an ending that came too late. Returns {status: expired, ask_message,
-- numbered}.
CREATE FUNCTION compass_expire_locked(ws uuid, m messages, idx int) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  ask_msg jsonb;
  last_id bigint;
BEGIN
  ask_msg := compass_write_ending(m, idx, 'expired', NULL, 'server', NULL);
  last_id := compass_append_ending(
    ws, m.channel_id, ask_msg, compass_presence_change(m.author_id, -1));
  RETURN jsonb_build_object('status', 'expired', 'ask_message', ask_msg,
    'numbered', last_id IS NOT NULL);
END
$$;

-- The answer of 0019, cut off at the deadline.
CREATE OR REPLACE FUNCTION compass_answer_ask(
  cred bytea, actor uuid, ask text, answered jsonb, answer_id uuid, surface text
) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
  ws uuid;
  last_id bigint;
  locked record;
  stored jsonb;
  standing text;
  answer_row messages%ROWTYPE;
  ask_msg jsonb;
  answer_msg jsonb;
  change jsonb;
BEGIN
  ws := compass_writer_scope(cred, actor);
  IF ws IS NULL THEN
    RETURN jsonb_build_object('status', 'unscoped');
  END IF;
  IF NOT compass_vouched(actor) THEN
    RETURN jsonb_build_object('status', 'not_found');
  END IF;
  SELECT * INTO locked FROM compass_lock_ask(ask, actor);
  IF (locked.m).id IS NULL THEN
    RETURN jsonb_build_object('status', 'not_found');
  END IF;
  stored := (locked.m).blocks -> locked.idx -> 'ask';
  IF NOT compass_may_answer(stored, actor) THEN
    RETURN jsonb_build_object('status', 'not_named');
  END IF;
  standing := compass_ask_standing(stored);
  IF standing <> 'open' THEN
    RETURN jsonb_build_object('status', standing);
  END IF;
  IF compass_ask_due(stored) THEN
    RETURN compass_expire_locked(ws, locked.m, locked.idx);
  END IF;
  -- Nothing rewrites an ask's content: only the answer keys may differ.
  IF (SELECT jsonb_agg(q - 'chosen_option_ids' - 'custom_text' - 'timed_out' ORDER BY i)
        FROM jsonb_array_elements(answered) WITH ORDINALITY AS x(q, i))
     IS DISTINCT FROM stored -> 'questions' THEN
    RETURN jsonb_build_object('status', 'content_mismatch');
  END IF;
  ask_msg := compass_write_ending(locked.m, locked.idx, 'answered', actor, surface, NULL, answered);
  INSERT INTO messages (id, workspace_id, channel_id, author_id, blocks)
    VALUES (answer_id, ws, (locked.m).channel_id, actor, jsonb_build_array(jsonb_build_object(
      'kind', 'ask_answer', 'ask_answer', jsonb_build_object(
        'ask_id', ask, 'ask_message_id', (locked.m).id, 'questions', answered))))
    RETURNING * INTO answer_row;
  answer_msg := compass_message_json(answer_row, (SELECT handle FROM accounts WHERE id = actor));
  change := compass_presence_change((locked.m).author_id, -1);
  last_id := compass_append_ending(ws, (locked.m).channel_id, ask_msg, change, answer_msg);
  RETURN jsonb_build_object('status', 'taken', 'ask_message', ask_msg, 'answer_message', answer_msg,
    'numbered', last_id IS NOT NULL);
END
$$;

-- The other endings of 0019, cut off at the deadline (a repeat of the same
-- withdraw still changes nothing).
CREATE OR REPLACE FUNCTION compass_end_ask(
  cred bytea, actor uuid, ask text, kind text, surface text, reason text
) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
  ws uuid;
  last_id bigint;
  locked record;
  stored jsonb;
  standing text;
  ask_msg jsonb;
  change jsonb;
BEGIN
  IF kind NOT IN ('declined', 'withdrawn_by_agent', 'withdrawn_by_owner') THEN
    RAISE EXCEPTION 'compass_end_ask does not end an ask as %', kind;
  END IF;
  ws := compass_writer_scope(cred, actor);
  IF ws IS NULL THEN
    RETURN jsonb_build_object('status', 'unscoped');
  END IF;
  IF NOT compass_vouched(actor) THEN
    RETURN jsonb_build_object('status', 'not_found');
  END IF;
  SELECT * INTO locked FROM compass_lock_ask(ask, actor);
  IF (locked.m).id IS NULL THEN
    RETURN jsonb_build_object('status', 'not_found');
  END IF;
  stored := (locked.m).blocks -> locked.idx -> 'ask';
  IF kind = 'declined' AND NOT compass_may_answer(stored, actor) THEN
    RETURN jsonb_build_object('status', 'not_named');
  ELSIF kind = 'withdrawn_by_agent' AND (locked.m).author_id <> actor THEN
    RETURN jsonb_build_object('status', 'not_author');
  ELSIF kind = 'withdrawn_by_owner' AND NOT EXISTS (
      SELECT 1 FROM accounts WHERE id = (locked.m).author_id AND owner_id = actor) THEN
    RETURN jsonb_build_object('status', 'not_owner');
  END IF;
  standing := compass_ask_standing(stored);
  IF standing = kind AND kind <> 'declined' THEN
    RETURN jsonb_build_object('status', 'unchanged', 'ask_message', compass_message_json(
      locked.m, (SELECT handle FROM accounts WHERE id = (locked.m).author_id)));
  END IF;
  IF standing <> 'open' THEN
    RETURN jsonb_build_object('status', standing);
  END IF;
  IF compass_ask_due(stored) THEN
    RETURN compass_expire_locked(ws, locked.m, locked.idx);
  END IF;
  ask_msg := compass_write_ending(locked.m, locked.idx, kind, actor, surface, reason);
  change := compass_presence_change((locked.m).author_id, -1);
  last_id := compass_append_ending(ws, (locked.m).channel_id, ask_msg, change);
  RETURN jsonb_build_object('status', 'changed', 'ask_message', ask_msg,
    'numbered', last_id IS NOT NULL);
END
$$;

-- The sweep of 0013, expiring through compass_expire_locked.
CREATE OR REPLACE FUNCTION compass_expire_due_asks(batch int) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  due record;
  m messages%ROWTYPE;
  idx int;
  result jsonb;
  expired int := 0;
  unnumbered uuid[] := '{}';
BEGIN
  FOR due IN
    SELECT d.ask_id, d.workspace_id, d.message_id FROM (
      SELECT a.ask_id, a.workspace_id, a.message_id, msg.author_id
      FROM asks a JOIN messages msg ON msg.id = a.message_id
      WHERE a.due_at <= now()
      ORDER BY a.due_at
      LIMIT batch
      FOR UPDATE OF msg SKIP LOCKED
    ) d
    ORDER BY d.author_id, d.ask_id
  LOOP
    SELECT * INTO m FROM messages WHERE id = due.message_id;
    SELECT i - 1 INTO idx FROM jsonb_array_elements(m.blocks) WITH ORDINALITY AS b(block, i)
      WHERE block ->> 'kind' = 'ask' AND block -> 'ask' ->> 'ask_id' = due.ask_id;
    IF compass_ask_standing(m.blocks -> idx -> 'ask') <> 'open' THEN
      UPDATE asks SET due_at = NULL WHERE ask_id = due.ask_id;
      CONTINUE;
    END IF;
    result := compass_expire_locked(due.workspace_id, m, idx);
    expired := expired + 1;
    IF NOT (result ->> 'numbered')::boolean AND NOT due.workspace_id = ANY(unnumbered) THEN
      unnumbered := unnumbered || due.workspace_id;
    END IF;
  END LOOP;
  RETURN jsonb_build_object('expired', expired, 'unnumbered', to_jsonb(unnumbered));
END
$$;

-- Every post of a deadline announces it, once per statement, in its
-- transaction: the listeners hear it only if it commits.
CREATE FUNCTION compass_deadlines_posted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  soonest timestamptz;
BEGIN
  SELECT min(due_at) INTO soonest FROM posted;
  IF soonest IS NOT NULL THEN
    PERFORM pg_notify('compass_deadlines', extract(epoch FROM soonest)::text);
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER asks_deadlines_posted AFTER INSERT ON asks
  REFERENCING NEW TABLE AS posted
  FOR EACH STATEMENT EXECUTE FUNCTION compass_deadlines_posted();

-- 3. An ask's content holds.

-- After the row is final (so no other trigger can change it after the
-- check). Block by block, unchanged ones at the cost of one comparison: the
-- hot endings pay a few microseconds.
CREATE FUNCTION compass_message_kept() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  i int;
  o jsonb;
  n jsonb;
  q int;
BEGIN
  IF (NEW.id, NEW.workspace_id, NEW.channel_id, NEW.author_id, NEW.created_at, NEW.position,
      NEW.search_text)
     IS DISTINCT FROM (OLD.id, OLD.workspace_id, OLD.channel_id, OLD.author_id, OLD.created_at,
      OLD.position, OLD.search_text)
     OR jsonb_array_length(NEW.blocks) <> jsonb_array_length(OLD.blocks)
  THEN
    RAISE EXCEPTION 'message %: an ask''s content never changes after its post', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  FOR i IN 0 .. jsonb_array_length(OLD.blocks) - 1 LOOP
    o := OLD.blocks -> i;
    n := NEW.blocks -> i;
    CONTINUE WHEN o = n;
    -- Only an ask's server-owned state may change: answered, cancelled,
    -- ending, and each question's chosen options, custom text, timed_out.
    IF o ->> 'kind' <> 'ask' OR n ->> 'kind' IS DISTINCT FROM 'ask'
       OR (o -> 'ask') - '{answered,cancelled,ending,questions}'::text[]
          <> (n -> 'ask') - '{answered,cancelled,ending,questions}'::text[]
       OR jsonb_array_length(o -> 'ask' -> 'questions')
          IS DISTINCT FROM jsonb_array_length(n -> 'ask' -> 'questions')
    THEN
      RAISE EXCEPTION 'message %: an ask''s content never changes after its post', OLD.id
        USING ERRCODE = 'check_violation';
    END IF;
    FOR q IN 0 .. jsonb_array_length(o -> 'ask' -> 'questions') - 1 LOOP
      IF (o -> 'ask' -> 'questions' -> q) - '{chosen_option_ids,custom_text,timed_out}'::text[]
         <> (n -> 'ask' -> 'questions' -> q) - '{chosen_option_ids,custom_text,timed_out}'::text[]
      THEN
        RAISE EXCEPTION 'message %: an ask''s content never changes after its post', OLD.id
          USING ERRCODE = 'check_violation';
      END IF;
    END LOOP;
    IF compass_ask_standing(o -> 'ask') <> 'open' THEN
      RAISE EXCEPTION 'message %: an ask that ended stays as it ended', OLD.id
        USING ERRCODE = 'check_violation';
    END IF;
  END LOOP;
  RETURN NULL;
END
$$;
CREATE TRIGGER messages_kept AFTER UPDATE ON messages
  FOR EACH ROW EXECUTE FUNCTION compass_message_kept();

CREATE FUNCTION compass_inbox_message_kept() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF (NEW.id, NEW.position, NEW.workspace_id, NEW.item_id, NEW.author_id, NEW.blocks, NEW.ask_id,
      NEW.answers_message_id, NEW.client_key, NEW.created_at)
     IS DISTINCT FROM (OLD.id, OLD.position, OLD.workspace_id, OLD.item_id, OLD.author_id,
      OLD.blocks, OLD.ask_id, OLD.answers_message_id, OLD.client_key, OLD.created_at)
  THEN
    RAISE EXCEPTION 'inbox message %: an ask''s content never changes after its post', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER inbox_messages_kept AFTER UPDATE ON inbox_messages
  FOR EACH ROW EXECUTE FUNCTION compass_inbox_message_kept();

REVOKE INSERT, UPDATE, DELETE ON messages FROM compass_app;

-- 4. What webhook endpoints are owed.

-- The deliveries one event of the log makes for an endpoint taking `types`
-- (empty: every type), by the rules of webhooks/payloads.py: an ask posted,
-- an ask ended, an inbox item opened, answered or closed.
CREATE FUNCTION compass_webhook_owed(kind text, payload jsonb, types text[]) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE kind
    WHEN 'message_posted' THEN (
      SELECT count(*)::integer FROM jsonb_array_elements(payload -> 'blocks') b
      WHERE b ->> 'kind' = 'ask' AND (cardinality(types) = 0 OR 'ask.posted' = ANY (types)))
    WHEN 'message_updated' THEN (
      SELECT least(count(*), 1)::integer FROM jsonb_array_elements(payload -> 'blocks') b
      WHERE b ->> 'kind' = 'ask' AND b -> 'ask' ? 'ending'
        AND (cardinality(types) = 0 OR CASE b -> 'ask' -> 'ending' ->> 'kind'
          WHEN 'answered' THEN 'ask.answered'
          WHEN 'declined' THEN 'ask.declined'
          WHEN 'expired' THEN 'ask.expired'
          ELSE 'ask.withdrawn' END = ANY (types)))
    WHEN 'inbox_item_changed' THEN (
      SELECT CASE WHEN cardinality(types) > 0 AND NOT ('inbox.item.' || status) = ANY (types)
                  THEN 0
                  WHEN status = 'open' AND (message IS NULL OR asks) THEN 1
                  WHEN status = 'answered' AND answers THEN 1
                  WHEN status = 'closed' AND (message IS NULL OR asks) THEN 1
                  ELSE 0 END
      FROM (SELECT payload ->> 'status' AS status,
                   nullif(payload -> 'message', 'null') AS message,
                   coalesce(payload -> 'message' -> 'blocks' @> '[{"kind": "ask"}]', false) AS asks,
                   coalesce(payload -> 'message' -> 'blocks' @> '[{"kind": "ask_answer"}]', false)
                     AS answers) AS change)
    ELSE 0
  END
$$;

-- What one endpoint is owed: its deliveries still to send, and what the
-- events past its cursor will make; and since when the oldest of them waits.
CREATE FUNCTION compass_webhook_owing(e webhook_endpoints, OUT owed bigint, OUT since timestamptz)
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

-- /metrics: the same, over every workspace.
CREATE OR REPLACE FUNCTION compass_webhook_metrics()
RETURNS TABLE (pending_deliveries bigint, oldest_pending_seconds double precision)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  SELECT coalesce(sum(o.owed), 0)::bigint,
         coalesce(extract(epoch FROM now() - min(o.since)), 0)::double precision
    FROM webhook_endpoints e, compass_webhook_owing(e) o
$$;
