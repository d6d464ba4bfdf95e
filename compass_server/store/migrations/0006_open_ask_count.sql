-- WAITING from a count kept on the agent's row, not a search of its messages:
-- the search read every dead index entry of the asks answered since the last
-- vacuum (0.8 ms of a 1.3 ms post under load), twice per lifecycle. Posts add
-- their asks, answers and cancels take one off, all under the row lock that
-- the presence recompute takes anyway. Members never leave channels, so every
-- open ask an agent authored is in a channel it belongs to.
ALTER TABLE accounts ADD COLUMN open_asks integer NOT NULL DEFAULT 0
  CHECK (open_asks >= 0);

UPDATE accounts a SET open_asks = (
  SELECT count(*) FROM messages m, jsonb_array_elements(m.blocks) AS b(block)
  WHERE m.author_id = a.id AND block ->> 'kind' = 'ask'
    AND NOT coalesce((block -> 'ask' ->> 'answered')::boolean, false)
    AND NOT coalesce((block -> 'ask' ->> 'cancelled')::boolean, false))
WHERE a.kind = 'agent';

DROP INDEX messages_open_asks;
DROP FUNCTION compass_presence_change(uuid);

-- Moves an agent's open-ask count by `opened` and recomputes its presence;
-- returns the presence_changed payload when it moved (NULL otherwise, and for
-- humans). WAITING wins over OFFLINE (no bound session), which wins over its
-- own status. It appends nothing: a write appends all its events last, so the
-- event counter's lock is always the last lock taken.
CREATE FUNCTION compass_presence_change(agent uuid, opened integer DEFAULT 0) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  acct accounts%ROWTYPE;
  next_state text;
BEGIN
  -- NO KEY UPDATE (what an UPDATE takes): compatible with the key-share
  -- locks of rows referencing it.
  IF opened = 0 THEN
    SELECT * INTO acct FROM accounts WHERE id = agent AND kind = 'agent' FOR NO KEY UPDATE;
  ELSE
    UPDATE accounts SET open_asks = open_asks + opened
      WHERE id = agent AND kind = 'agent' RETURNING * INTO acct;
  END IF;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF acct.open_asks > 0 THEN
    next_state := 'waiting';
  ELSIF NOT EXISTS (SELECT 1 FROM agent_sessions s WHERE s.agent_id = agent) THEN
    next_state := 'offline';
  ELSE
    next_state := acct.status;
  END IF;
  IF next_state = acct.presence_state AND acct.status_text = acct.presence_text THEN
    RETURN NULL;
  END IF;
  UPDATE accounts SET presence_state = next_state, presence_text = acct.status_text
    WHERE id = agent;
  RETURN jsonb_build_object('account_id', agent, 'state', next_state, 'status_text', acct.status_text);
END
$$;

-- The ask writes of migration 0004, now moving the count, and saying whether
-- their events were numbered (else the caller has them numbered after commit).

-- Posts a message for a member of the channel; NULL when the author isn't one.
CREATE OR REPLACE FUNCTION compass_post_message(
  ws uuid, message_id uuid, channel uuid, author uuid, body jsonb, words text, ask_ids text[]
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
  INSERT INTO asks (ask_id, workspace_id, message_id) SELECT unnest(ask_ids), ws, message_id;
  msg := compass_message_json(m, (SELECT handle FROM accounts WHERE id = author));
  IF cardinality(ask_ids) > 0 THEN
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
-- checked by the caller; its content must be the stored content. Returns
-- {status} and, when taken, the ask's message and the answer message.
CREATE OR REPLACE FUNCTION compass_answer_ask(
  ws uuid, actor uuid, ask text, answered jsonb, answer_id uuid
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  last_id bigint;
  locked record;
  stored jsonb;
  asked jsonb;
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
  IF coalesce((stored ->> 'answered')::boolean, false) THEN
    RETURN jsonb_build_object('status', 'answered');
  END IF;
  IF coalesce((stored ->> 'cancelled')::boolean, false) THEN
    RETURN jsonb_build_object('status', 'cancelled');
  END IF;
  -- Nothing rewrites an ask's content: only the answer keys may differ.
  IF (SELECT jsonb_agg(q - 'chosen_option_ids' - 'custom_text' - 'timed_out' ORDER BY i)
        FROM jsonb_array_elements(answered) WITH ORDINALITY AS x(q, i))
     IS DISTINCT FROM stored -> 'questions' THEN
    RETURN jsonb_build_object('status', 'content_mismatch');
  END IF;
  asked := jsonb_build_object('ask_id', ask, 'questions', answered, 'answered', true);
  UPDATE messages SET blocks = jsonb_set(blocks, ARRAY[locked.idx::text, 'ask'], asked)
    WHERE id = (locked.m).id;
  INSERT INTO messages (id, workspace_id, channel_id, author_id, blocks)
    VALUES (answer_id, ws, (locked.m).channel_id, actor, jsonb_build_array(jsonb_build_object(
      'kind', 'ask_answer', 'ask_answer', jsonb_build_object(
        'ask_id', ask, 'ask_message_id', (locked.m).id, 'questions', answered))))
    RETURNING * INTO answer_row;
  ask_msg := compass_message_json(
    (SELECT msg FROM messages msg WHERE msg.id = (locked.m).id),
    (SELECT handle FROM accounts WHERE id = (locked.m).author_id));
  answer_msg := compass_message_json(answer_row, (SELECT handle FROM accounts WHERE id = actor));
  change := compass_presence_change((locked.m).author_id, -1);
  IF change IS NULL THEN
    last_id := compass_append_events(
      ARRAY['message_updated', 'message_posted'],
      ARRAY[(locked.m).channel_id, (locked.m).channel_id], ARRAY[ask_msg, answer_msg]);
  ELSE
    last_id := compass_append_events(
      ARRAY['message_updated', 'message_posted', 'presence_changed'],
      ARRAY[(locked.m).channel_id, (locked.m).channel_id, NULL],
      ARRAY[ask_msg, answer_msg, change]);
  END IF;
  RETURN jsonb_build_object('status', 'taken', 'ask_message', ask_msg, 'answer_message', answer_msg,
    'numbered', last_id IS NOT NULL);
END
$$;

-- Withdraws an ask for its author. Order: find, author, state. A repeat is
-- {status: unchanged} with no write and no event.
CREATE OR REPLACE FUNCTION compass_cancel_ask(ws uuid, actor uuid, ask text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  last_id bigint;
  locked record;
  stored jsonb;
  ask_msg jsonb;
  change jsonb;
BEGIN
  PERFORM set_config('compass.workspace_id', ws::text, true);
  SELECT * INTO locked FROM compass_lock_ask(ask, actor);
  IF (locked.m).id IS NULL THEN
    RETURN jsonb_build_object('status', 'not_found');
  END IF;
  IF (locked.m).author_id <> actor THEN
    RETURN jsonb_build_object('status', 'not_author');
  END IF;
  stored := (locked.m).blocks -> locked.idx -> 'ask';
  IF coalesce((stored ->> 'cancelled')::boolean, false) THEN
    RETURN jsonb_build_object('status', 'unchanged', 'ask_message', compass_message_json(
      locked.m, (SELECT handle FROM accounts WHERE id = actor)));
  END IF;
  IF coalesce((stored ->> 'answered')::boolean, false) THEN
    RETURN jsonb_build_object('status', 'answered');
  END IF;
  UPDATE messages
    SET blocks = jsonb_set(blocks, ARRAY[locked.idx::text, 'ask', 'cancelled'], 'true')
    WHERE id = (locked.m).id;
  ask_msg := compass_message_json(
    (SELECT msg FROM messages msg WHERE msg.id = (locked.m).id),
    (SELECT handle FROM accounts WHERE id = actor));
  change := compass_presence_change(actor, -1);
  IF change IS NULL THEN
    last_id := compass_append_events(
      ARRAY['message_updated'], ARRAY[(locked.m).channel_id], ARRAY[ask_msg]);
  ELSE
    last_id := compass_append_events(
      ARRAY['message_updated', 'presence_changed'], ARRAY[(locked.m).channel_id, NULL],
      ARRAY[ask_msg, change]);
  END IF;
  RETURN jsonb_build_object('status', 'changed', 'ask_message', ask_msg,
    'numbered', last_id IS NOT NULL);
END
$$;
