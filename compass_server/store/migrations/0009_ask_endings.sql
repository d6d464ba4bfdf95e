-- Every ending of an ask is typed and recorded. An ask ends exactly once:
-- answered, withdrawn by its agent, withdrawn by the agent's owner, declined,
-- or expired at its deadline. Each ending is written by one path
-- (compass_write_ending) under the ask message's row lock, so exactly one
-- wins a race; the losers read the winner's ending on the locked row.
--
-- The ask's JSON gains `ending` {kind, actor_id, actor_handle, at, surface,
-- reason}; the flags older clients read stay meaningful: `answered` only for
-- an answer, `cancelled` for either withdraw, and an expiry marks every
-- question `timed_out`. Asks that ended before this migration keep their
-- flags and no `ending`; readers derive the kind from the flags.

-- When an open ask expires; NULL without a deadline and once it has ended,
-- so the sweep's index holds only asks that can still expire.
ALTER TABLE asks ADD COLUMN due_at timestamptz;
CREATE INDEX asks_due ON asks (due_at) WHERE due_at IS NOT NULL;

-- Who did what to an ask, when, and through which surface; written in the
-- transaction of the change. Refused attempts write nothing.
CREATE TABLE ask_history (
  id bigserial PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  ask_id text NOT NULL REFERENCES asks (ask_id),
  kind text NOT NULL CHECK (kind IN (
    'posted', 'answered', 'withdrawn_by_agent', 'withdrawn_by_owner', 'declined', 'expired')),
  -- NULL for the server (an expiry).
  actor_id uuid REFERENCES accounts (id),
  -- NULL for changes made before surfaces were recorded.
  surface text CHECK (surface IN ('grpc', 'connect', 'relay', 'web', 'inbox', 'server')),
  reason text NOT NULL DEFAULT '',
  at timestamptz NOT NULL DEFAULT now(),
  CHECK ((kind = 'expired') = (actor_id IS NULL))
);
CREATE INDEX ask_history_ask ON ask_history (ask_id, id);
-- An ask is posted once and ends once, whatever races.
CREATE UNIQUE INDEX ask_history_one_post ON ask_history (ask_id) WHERE kind = 'posted';
CREATE UNIQUE INDEX ask_history_one_ending ON ask_history (ask_id) WHERE kind <> 'posted';
ALTER TABLE ask_history ENABLE ROW LEVEL SECURITY;
CREATE POLICY workspace_only ON ask_history
  USING (workspace_id = compass_workspace()) WITH CHECK (workspace_id = compass_workspace());
GRANT SELECT, INSERT ON ask_history TO compass_app;
GRANT USAGE ON SEQUENCE ask_history_id_seq TO compass_app;

-- The record of asks posted and answered before this migration; a withdraw
-- from then has no time on record, so it has no entry.
INSERT INTO ask_history (workspace_id, ask_id, kind, actor_id, at)
  SELECT a.workspace_id, a.ask_id, 'posted', m.author_id, m.created_at
  FROM asks a JOIN messages m ON m.id = a.message_id;
INSERT INTO ask_history (workspace_id, ask_id, kind, actor_id, at)
  SELECT m.workspace_id, b.block -> 'ask_answer' ->> 'ask_id', 'answered', m.author_id, m.created_at
  FROM messages m, jsonb_array_elements(m.blocks) AS b(block)
  WHERE b.block ->> 'kind' = 'ask_answer';

-- 'open', or how the ask ended (from the flags, for asks that ended before
-- endings were recorded).
CREATE FUNCTION compass_ask_standing(stored jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN stored ? 'ending' THEN stored -> 'ending' ->> 'kind'
    WHEN coalesce((stored ->> 'answered')::boolean, false) THEN 'answered'
    WHEN coalesce((stored ->> 'cancelled')::boolean, false) THEN 'withdrawn_by_agent'
    ELSE 'open'
  END
$$;

-- Whether the ask lets this person answer or decline it: anyone, unless it
-- names its answerers.
CREATE FUNCTION compass_may_answer(stored jsonb, actor uuid) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT NOT (stored ? 'answerer_ids') OR (stored -> 'answerer_ids') ? actor::text
$$;

-- Ends a locked, open ask: writes its ending (with the flags older clients
-- read), its history entry, and clears its due time. `answered` is the
-- answered questions, for an answer only. Returns the ask's message as the
-- event log carries it. The caller moves the agent's open-ask count and
-- appends the events.
CREATE FUNCTION compass_write_ending(
  m messages, idx int, kind text, actor uuid, surface text, reason text,
  answered jsonb DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  stored jsonb := m.blocks -> idx -> 'ask';
  ask text := stored ->> 'ask_id';
  ending jsonb;
  asked jsonb;
BEGIN
  ending := jsonb_strip_nulls(jsonb_build_object(
    'kind', kind, 'actor_id', actor,
    'actor_handle', (SELECT handle FROM accounts WHERE id = actor),
    'at', now(), 'surface', surface, 'reason', nullif(reason, '')));
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
    WHERE id = m.id;
  IF stored ? 'deadline' THEN
    UPDATE asks SET due_at = NULL WHERE ask_id = ask;
  END IF;
  INSERT INTO ask_history (workspace_id, ask_id, kind, actor_id, surface, reason, at)
    VALUES (m.workspace_id, ask, kind, actor, surface, coalesce(reason, ''), now());
  RETURN compass_message_json(
    (SELECT msg FROM messages msg WHERE msg.id = m.id),
    (SELECT handle FROM accounts WHERE id = m.author_id));
END
$$;

-- Appends an ending's events: the ask's MessageUpdated, the answer's
-- MessagePosted when there is one, and the agent's presence change when it
-- moved. Returns the last event id, NULL when they are left to number after
-- commit.
CREATE FUNCTION compass_append_ending(
  channel uuid, ask_msg jsonb, change jsonb, answer_msg jsonb DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  kinds text[] := ARRAY['message_updated'];
  channels uuid[] := ARRAY[channel];
  payloads jsonb[] := ARRAY[ask_msg];
BEGIN
  IF answer_msg IS NOT NULL THEN
    kinds := kinds || 'message_posted'::text;
    channels := channels || channel;
    payloads := payloads || answer_msg;
  END IF;
  IF change IS NOT NULL THEN
    kinds := kinds || 'presence_changed'::text;
    channels := channels || NULL::uuid;
    payloads := payloads || change;
  END IF;
  RETURN compass_append_events(kinds, channels, payloads);
END
$$;

-- Posts a message for a member of the channel; NULL when the author isn't one.
-- Each ask is indexed with its due time and recorded as posted.
DROP FUNCTION compass_post_message(uuid, uuid, uuid, uuid, jsonb, text, text[]);
CREATE FUNCTION compass_post_message(
  ws uuid, message_id uuid, channel uuid, author uuid, body jsonb, words text, ask_ids text[],
  due timestamptz[], surface text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  last_id bigint;
  m messages%ROWTYPE;
  msg jsonb;
  change jsonb;
BEGIN
  PERFORM set_config('compass.workspace_id', ws::text, true);
  INSERT INTO messages (id, workspace_id, channel_id, author_id, blocks, search_text)
    SELECT message_id, ws, channel, author, body, words
    WHERE EXISTS (
      SELECT 1 FROM channel_members WHERE channel_id = channel AND account_id = author)
    RETURNING * INTO m;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  msg := compass_message_json(m, (SELECT handle FROM accounts WHERE id = author));
  IF cardinality(ask_ids) > 0 THEN
    INSERT INTO asks (ask_id, workspace_id, message_id, due_at)
      SELECT a, ws, message_id, d FROM unnest(ask_ids, due) AS x(a, d);
    INSERT INTO ask_history (workspace_id, ask_id, kind, actor_id, surface)
      SELECT ws, a, 'posted', author, surface FROM unnest(ask_ids) AS a;
    change := compass_presence_change(author, cardinality(ask_ids));
  END IF;
  IF change IS NULL THEN
    last_id := compass_append_events(ARRAY['message_posted'], ARRAY[channel], ARRAY[msg]);
  ELSE
    last_id := compass_append_events(
      ARRAY['message_posted', 'presence_changed'], ARRAY[channel, NULL], ARRAY[msg, change]);
  END IF;
  RETURN jsonb_build_object('message', msg, 'numbered', last_id IS NOT NULL);
END
$$;

-- Answers an ask. `answered` is the ask's questions with their answer state,
-- checked by the caller; its content must be the stored content. Refusals in
-- the order visibility, permission, state. Returns {status} and, when taken,
-- the ask's message and the answer message.
DROP FUNCTION compass_answer_ask(uuid, uuid, text, jsonb, uuid);
CREATE FUNCTION compass_answer_ask(
  ws uuid, actor uuid, ask text, answered jsonb, answer_id uuid, surface text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  last_id bigint;
  locked record;
  stored jsonb;
  standing text;
  answer_row messages%ROWTYPE;
  ask_msg jsonb;
  answer_msg jsonb;
  change jsonb;
BEGIN
  PERFORM set_config('compass.workspace_id', ws::text, true);
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
  last_id := compass_append_ending((locked.m).channel_id, ask_msg, change, answer_msg);
  RETURN jsonb_build_object('status', 'taken', 'ask_message', ask_msg, 'answer_message', answer_msg,
    'numbered', last_id IS NOT NULL);
END
$$;

-- Ends an ask without an answer, for a person or an agent: 'declined' (who
-- may answer may decline), 'withdrawn_by_agent' (its author only) or
-- 'withdrawn_by_owner' (the owner of its agent only). Refusals in the order
-- visibility, permission, state; a repeat of the same withdraw is {status:
-- unchanged} with no write and no event. The answer (compass_answer_ask) and
-- the expiry sweep (compass_expire_due_asks) end asks through the same
-- compass_write_ending, under the same row lock.
DROP FUNCTION compass_cancel_ask(uuid, uuid, text);
CREATE FUNCTION compass_end_ask(
  ws uuid, actor uuid, ask text, kind text, surface text, reason text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
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
  PERFORM set_config('compass.workspace_id', ws::text, true);
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
  ask_msg := compass_write_ending(locked.m, locked.idx, kind, actor, surface, reason);
  change := compass_presence_change((locked.m).author_id, -1);
  last_id := compass_append_ending((locked.m).channel_id, ask_msg, change);
  RETURN jsonb_build_object('status', 'changed', 'ask_message', ask_msg,
    'numbered', last_id IS NOT NULL);
END
$$;

-- The expiry sweep, across workspaces: ends up to `batch` open asks whose
-- deadline passed. Several servers sweep at once without meeting: each locks
-- the asks' messages with SKIP LOCKED, so an ask being answered (or swept)
-- elsewhere is left to that transaction, and the state is checked again on
-- the locked row, so an ask answered first is never expired. Account locks
-- are taken in author order, so two sweeps can't deadlock. One transaction:
-- a sweep that dies mid-way leaves every ask as it was. Returns how many
-- expired and the workspaces whose events are left to number after commit.
CREATE FUNCTION compass_expire_due_asks(batch int) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  due record;
  m messages%ROWTYPE;
  idx int;
  ask_msg jsonb;
  change jsonb;
  last_id bigint;
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
    PERFORM set_config('compass.workspace_id', due.workspace_id::text, true);
    SELECT * INTO m FROM messages WHERE id = due.message_id;
    SELECT i - 1 INTO idx FROM jsonb_array_elements(m.blocks) WITH ORDINALITY AS b(block, i)
      WHERE block ->> 'kind' = 'ask' AND block -> 'ask' ->> 'ask_id' = due.ask_id;
    IF compass_ask_standing(m.blocks -> idx -> 'ask') <> 'open' THEN
      UPDATE asks SET due_at = NULL WHERE ask_id = due.ask_id;
      CONTINUE;
    END IF;
    ask_msg := compass_write_ending(m, idx, 'expired', NULL, 'server', NULL);
    change := compass_presence_change(m.author_id, -1);
    last_id := compass_append_ending(m.channel_id, ask_msg, change);
    expired := expired + 1;
    IF last_id IS NULL AND NOT due.workspace_id = ANY(unnumbered) THEN
      unnumbered := unnumbered || due.workspace_id;
    END IF;
  END LOOP;
  RETURN jsonb_build_object('expired', expired, 'unnumbered', to_jsonb(unnumbered));
END
$$;
REVOKE ALL ON FUNCTION compass_expire_due_asks(int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_expire_due_asks(int) TO compass_app;

-- The nearest deadline of any open ask, across workspaces: when the sweep
-- should next run.
CREATE FUNCTION compass_next_ask_deadline() RETURNS timestamptz
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT min(due_at) FROM asks WHERE due_at IS NOT NULL
$$;
REVOKE ALL ON FUNCTION compass_next_ask_deadline() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_next_ask_deadline() TO compass_app;
