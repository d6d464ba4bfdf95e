-- Leaner hot writes: the same outcomes for less PostgreSQL work per call.
--
-- 1. The row-level security of participation (0017) ran on top of the write
-- functions' own checks: every INSERT, UPDATE and locking read of a message
-- asked again, up to twice per statement, whether the actor took part in the
-- channel (each time proving the actor from its credential and the
-- workspace of every table the view reads). The three hot writes now run as
-- compass_writer, a role that owns nothing and nothing logs in as: the
-- workspace's policy holds it as it holds compass_app, the participation
-- policies don't, and each function checks what they checked, once: that
-- its credential vouches for the account it acts as, and that the account
-- takes part in the channel. Every other statement of compass_app is held
-- by the policies as before.
--
-- 2. Under compass_writer the workspace's policy reads the workspace the
-- function proved from its credential at entry (compass.writer_workspace),
-- instead of proving it again for every table of every statement. Only
-- those functions run as compass_writer, and each names the workspace
-- before its first read; compass_app naming one changes nothing (its
-- statements still prove theirs), as compass.operator_workspace is heard
-- only from compass_maintenance.
--
-- 3. Participation (compass_participation's definition) costs one index
-- probe when the account is a member of the channel itself, and reads its
-- chain only otherwise. Written out where it is asked: a SQL function with a
-- subquery is never inlined, so it would be planned again on every call.
--
-- 4. A presence change updates the agent's row once.

DO $$
BEGIN
  CREATE ROLE compass_writer NOLOGIN;
EXCEPTION WHEN duplicate_object THEN NULL;
END
$$;
-- To hand it the functions below.
GRANT compass_writer TO CURRENT_USER;

GRANT SELECT, INSERT, UPDATE ON messages, asks, events TO compass_writer;
GRANT SELECT, UPDATE ON accounts, event_counters TO compass_writer;
GRANT INSERT ON ask_history TO compass_writer;
GRANT SELECT ON channel_members, inbox_items, agent_sessions, compass_participation
  TO compass_writer;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO compass_writer;
-- What the workspace's policy and the actor's proof call.
GRANT EXECUTE ON FUNCTION compass_credential_workspace(), compass_actor() TO compass_writer;

DO $$
DECLARE
  t text;
BEGIN
  FOR t IN SELECT tablename FROM pg_policies
           WHERE schemaname = 'public' AND policyname = 'workspace_only' LOOP
    EXECUTE format(
      'ALTER POLICY workspace_only ON %I TO compass_app, compass_maintenance, compass_writer', t);
  END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION compass_workspace() RETURNS uuid
LANGUAGE sql STABLE AS $$
  SELECT CASE current_user
    WHEN 'compass_maintenance'
      THEN nullif(pg_catalog.current_setting('compass.operator_workspace', true), '')::uuid
    WHEN 'compass_writer'
      THEN nullif(pg_catalog.current_setting('compass.writer_workspace', true), '')::uuid
    ELSE public.compass_credential_workspace()
  END
$$;

-- What a write function does first: scopes the transaction to its caller's
-- credential and the account it acts as, and names the workspace that
-- credential proves (NULL: none) for the rest of the function.
CREATE FUNCTION compass_writer_scope(cred bytea, actor uuid) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
  ws uuid;
BEGIN
  PERFORM set_config('compass.credential', encode(cred, 'hex'), true);
  PERFORM set_config('compass.actor', coalesce(actor::text, ''), true);
  ws := compass_credential_workspace();
  PERFORM set_config('compass.writer_workspace', coalesce(ws::text, ''), true);
  RETURN ws;
END
$$;
REVOKE ALL ON FUNCTION compass_writer_scope(bytea, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_writer_scope(bytea, uuid) TO compass_writer;

-- Whether the transaction's credential vouches for the account `named`.
CREATE FUNCTION compass_vouched(named uuid) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT named IS NOT NULL AND compass_actor() IS NOT DISTINCT FROM named
$$;

CREATE OR REPLACE FUNCTION compass_presence_change(agent uuid, opened integer DEFAULT 0) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  acct accounts%ROWTYPE;
  next_state text;
BEGIN
  -- NO KEY UPDATE (what an UPDATE takes): compatible with the key-share
  -- locks of rows referencing it.
  SELECT * INTO acct FROM accounts WHERE id = agent AND kind = 'agent' FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  acct.open_asks := acct.open_asks + opened;
  IF acct.open_asks > 0
     OR EXISTS (SELECT 1 FROM inbox_items i WHERE i.agent_id = agent AND i.status = 'open') THEN
    next_state := 'waiting';
  ELSIF NOT EXISTS (SELECT 1 FROM agent_sessions s WHERE s.agent_id = agent) THEN
    next_state := 'offline';
  ELSE
    next_state := acct.status;
  END IF;
  IF next_state = acct.presence_state AND acct.status_text = acct.presence_text THEN
    IF opened <> 0 THEN
      UPDATE accounts SET open_asks = open_asks + opened WHERE id = agent;
    END IF;
    RETURN NULL;
  END IF;
  UPDATE accounts
    SET open_asks = open_asks + opened, presence_state = next_state,
        presence_text = acct.status_text
    WHERE id = agent;
  RETURN jsonb_build_object('account_id', agent, 'state', next_state, 'status_text', acct.status_text);
END
$$;

CREATE OR REPLACE FUNCTION compass_lock_ask(ask text, actor uuid, OUT m messages, OUT idx int)
LANGUAGE plpgsql AS $$
BEGIN
  SELECT msg.* INTO m FROM asks a
    JOIN messages msg ON msg.id = a.message_id
    WHERE a.ask_id = ask
      AND (EXISTS (SELECT 1 FROM channel_members cm
                   WHERE cm.channel_id = msg.channel_id AND cm.account_id = actor)
           OR EXISTS (SELECT 1 FROM compass_participation p
                      WHERE p.account_id = actor AND p.channel_id = msg.channel_id))
    FOR UPDATE OF msg;
  IF m.id IS NULL THEN
    RETURN;
  END IF;
  SELECT i - 1 INTO idx FROM jsonb_array_elements(m.blocks) WITH ORDINALITY AS b(block, i)
    WHERE block ->> 'kind' = 'ask' AND block -> 'ask' ->> 'ask_id' = ask;
END
$$;

CREATE OR REPLACE FUNCTION compass_ask_state(ask text, actor uuid) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'message_id', m.id,
    'author_id', m.author_id,
    'ask', (SELECT b -> 'ask' FROM jsonb_array_elements(m.blocks) b
            WHERE b ->> 'kind' = 'ask' AND b -> 'ask' ->> 'ask_id' = ask))
  FROM asks a
  JOIN messages m ON m.id = a.message_id
  WHERE a.ask_id = ask
    AND (EXISTS (SELECT 1 FROM channel_members cm
                 WHERE cm.channel_id = m.channel_id AND cm.account_id = actor)
         OR EXISTS (SELECT 1 FROM compass_participation p
                    WHERE p.account_id = actor AND p.channel_id = m.channel_id))
$$;

-- The bodies of 0017, with the checks the participation policies made.
CREATE OR REPLACE FUNCTION compass_post_message(
  cred bytea, message_id uuid, channel uuid, author uuid, body jsonb, words text, ask_ids text[],
  due timestamptz[], surface text
) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
  ws uuid;
  last_id bigint;
  m messages%ROWTYPE;
  msg jsonb;
  change jsonb;
BEGIN
  ws := compass_writer_scope(cred, author);
  IF ws IS NULL THEN
    RETURN jsonb_build_object('unscoped', true);
  END IF;
  IF NOT compass_vouched(author) THEN
    RETURN NULL;
  END IF;
  -- The author's row: a move of the author or of an agent above it rewrites
  -- it, so the post waits for the move (and then reads the new chain) or the
  -- move for the post. An ask's post takes the lock its count's update needs.
  IF cardinality(ask_ids) > 0 THEN
    PERFORM 1 FROM accounts WHERE id = author FOR NO KEY UPDATE;
  ELSE
    PERFORM 1 FROM accounts WHERE id = author FOR SHARE;
  END IF;
  INSERT INTO messages (id, workspace_id, channel_id, author_id, blocks, search_text)
    SELECT message_id, ws, channel, author, body, words
    WHERE EXISTS (SELECT 1 FROM channel_members cm
                  WHERE cm.channel_id = channel AND cm.account_id = author)
       OR EXISTS (SELECT 1 FROM compass_participation p
                  WHERE p.account_id = author AND p.channel_id = channel)
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
    last_id := compass_append_events_to(ws, ARRAY['message_posted'], ARRAY[channel], ARRAY[msg]);
  ELSE
    last_id := compass_append_events_to(ws,
      ARRAY['message_posted', 'presence_changed'], ARRAY[channel, NULL], ARRAY[msg, change]);
  END IF;
  RETURN jsonb_build_object('message', msg, 'numbered', last_id IS NOT NULL);
END
$$;

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
  ask_msg := compass_write_ending(locked.m, locked.idx, kind, actor, surface, reason);
  change := compass_presence_change((locked.m).author_id, -1);
  last_id := compass_append_ending(ws, (locked.m).channel_id, ask_msg, change);
  RETURN jsonb_build_object('status', 'changed', 'ask_message', ask_msg,
    'numbered', last_id IS NOT NULL);
END
$$;

-- A function is handed over only to a role that may create in its schema;
-- compass_writer keeps no such right.
GRANT CREATE ON SCHEMA public TO compass_writer;
ALTER FUNCTION compass_post_message(
  bytea, uuid, uuid, uuid, jsonb, text, text[], timestamptz[], text) OWNER TO compass_writer;
ALTER FUNCTION compass_answer_ask(bytea, uuid, text, jsonb, uuid, text) OWNER TO compass_writer;
ALTER FUNCTION compass_end_ask(bytea, uuid, text, text, text, text) OWNER TO compass_writer;
REVOKE CREATE ON SCHEMA public FROM compass_writer;
-- Called as their owner, these run with its rights: only compass_app calls them.
REVOKE ALL ON FUNCTION compass_post_message(
  bytea, uuid, uuid, uuid, jsonb, text, text[], timestamptz[], text) FROM PUBLIC;
REVOKE ALL ON FUNCTION compass_answer_ask(bytea, uuid, text, jsonb, uuid, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION compass_end_ask(bytea, uuid, text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_post_message(
  bytea, uuid, uuid, uuid, jsonb, text, text[], timestamptz[], text) TO compass_app;
GRANT EXECUTE ON FUNCTION compass_answer_ask(bytea, uuid, text, jsonb, uuid, text)
  TO compass_app;
GRANT EXECUTE ON FUNCTION compass_end_ask(bytea, uuid, text, text, text, text) TO compass_app;
