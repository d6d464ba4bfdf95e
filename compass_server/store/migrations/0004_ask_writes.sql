-- The hot writes of an ask's life, each one statement: a round trip to the
-- database costs more than the work, so post, answer and cancel lock, check,
-- write, append their events and wake listeners in one call. The rules that
-- are not about state (ask and answer validation) stay in the store's Python;
-- these check only what needs the locked row.

-- A message row as the event log and the store read it.
CREATE FUNCTION compass_message_json(m messages, handle text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'message_id', m.id, 'channel_id', m.channel_id, 'author_id', m.author_id,
    'author_handle', handle, 'blocks', m.blocks, 'created_at', m.created_at,
    'position', m.position)
$$;

-- Posts a message for a member of the channel; NULL when the author isn't one.
CREATE FUNCTION compass_post_message(
  ws uuid, message_id uuid, channel uuid, author uuid, body jsonb, words text, ask_ids text[]
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
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
    change := compass_presence_change(author);
  END IF;
  IF change IS NULL THEN
    PERFORM compass_append_events(ARRAY['message_posted'], ARRAY[channel], ARRAY[msg]);
  ELSE
    PERFORM compass_append_events(
      ARRAY['message_posted', 'presence_changed'], ARRAY[channel, NULL], ARRAY[msg, change]);
  END IF;
  RETURN msg;
END
$$;

-- The ask's message locked for a read-modify-write, if the actor can see it,
-- with the position of the ask block in it.
CREATE FUNCTION compass_lock_ask(ask text, actor uuid, OUT m messages, OUT idx int)
LANGUAGE plpgsql AS $$
BEGIN
  SELECT msg.* INTO m FROM asks a
    JOIN messages msg ON msg.id = a.message_id
    JOIN channel_members cm ON cm.channel_id = msg.channel_id AND cm.account_id = actor
    WHERE a.ask_id = ask
    FOR UPDATE OF msg;
  IF m.id IS NULL THEN
    RETURN;
  END IF;
  SELECT i - 1 INTO idx FROM jsonb_array_elements(m.blocks) WITH ORDINALITY AS b(block, i)
    WHERE block ->> 'kind' = 'ask' AND block -> 'ask' ->> 'ask_id' = ask;
END
$$;

-- Answers an ask. `answered` is the ask's questions with their answer state,
-- checked by the caller; its content must be the stored content. Returns
-- {status} and, when taken, the ask's message and the answer message.
CREATE FUNCTION compass_answer_ask(
  ws uuid, actor uuid, ask text, answered jsonb, answer_id uuid
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
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
  change := compass_presence_change((locked.m).author_id);
  IF change IS NULL THEN
    PERFORM compass_append_events(
      ARRAY['message_updated', 'message_posted'],
      ARRAY[(locked.m).channel_id, (locked.m).channel_id], ARRAY[ask_msg, answer_msg]);
  ELSE
    PERFORM compass_append_events(
      ARRAY['message_updated', 'message_posted', 'presence_changed'],
      ARRAY[(locked.m).channel_id, (locked.m).channel_id, NULL],
      ARRAY[ask_msg, answer_msg, change]);
  END IF;
  RETURN jsonb_build_object('status', 'taken', 'ask_message', ask_msg, 'answer_message', answer_msg);
END
$$;

-- Withdraws an ask for its author. Order: find, author, state. A repeat is
-- {status: unchanged} with no write and no event.
CREATE FUNCTION compass_cancel_ask(ws uuid, actor uuid, ask text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
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
  change := compass_presence_change(actor);
  IF change IS NULL THEN
    PERFORM compass_append_events(
      ARRAY['message_updated'], ARRAY[(locked.m).channel_id], ARRAY[ask_msg]);
  ELSE
    PERFORM compass_append_events(
      ARRAY['message_updated', 'presence_changed'], ARRAY[(locked.m).channel_id, NULL],
      ARRAY[ask_msg, change]);
  END IF;
  RETURN jsonb_build_object('status', 'changed', 'ask_message', ask_msg);
END
$$;

-- Where an ask stands for a reader, without a lock: for the error path.
CREATE FUNCTION compass_ask_state(ask text, actor uuid) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'message_id', m.id,
    'author_id', m.author_id,
    'ask', (SELECT b -> 'ask' FROM jsonb_array_elements(m.blocks) b
            WHERE b ->> 'kind' = 'ask' AND b -> 'ask' ->> 'ask_id' = ask))
  FROM asks a
  JOIN messages m ON m.id = a.message_id
  JOIN channel_members cm ON cm.channel_id = m.channel_id AND cm.account_id = actor
  WHERE a.ask_id = ask
$$;
