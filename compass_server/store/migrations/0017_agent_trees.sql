-- Agent trees. An agent may have a parent: another agent of its workspace
-- and owner. It takes part in a channel when it or any agent above it (its
-- chain) is a member, and compass_participation is the one definition of
-- that: the queries, the write functions and row-level security all read it.
--
-- The chain is kept on each account (itself first, then its parent, up to
-- its root), written only here: by the tree trigger when a parent is set,
-- and for the agents below one that moves. So a post reads its author's
-- chain from one row it locks, and a move, which rewrites that row, waits
-- for the post or the post for the move.

ALTER TABLE accounts
  ADD COLUMN parent_id uuid,
  -- When the agent was put under its parent: it hears its chain's channels
  -- from then on.
  ADD COLUMN attached_at timestamptz,
  ADD COLUMN chain uuid[];
UPDATE accounts SET chain = ARRAY[id];
ALTER TABLE accounts
  ALTER COLUMN chain SET NOT NULL,
  ADD CONSTRAINT accounts_parent_id_fkey FOREIGN KEY (workspace_id, parent_id)
    REFERENCES accounts (workspace_id, id),
  ADD CONSTRAINT accounts_chain_from_self CHECK (
    chain[1] = id AND (parent_id IS NULL) = (cardinality(chain) = 1)
    AND (parent_id IS NULL OR chain[2] = parent_id)),
  ADD CONSTRAINT accounts_attached CHECK ((parent_id IS NULL) = (attached_at IS NULL));
CREATE INDEX accounts_parent ON accounts (parent_id) WHERE parent_id IS NOT NULL;

-- The bounds of a tree: an agent has at most this many agents above it, and
-- a tree (a root agent and every agent below it) holds at most this many.
CREATE FUNCTION compass_max_agent_depth() RETURNS integer
LANGUAGE sql IMMUTABLE AS 'SELECT 8';
CREATE FUNCTION compass_max_tree_agents() RETURNS integer
LANGUAGE sql IMMUTABLE AS 'SELECT 100';

-- The agent and every agent below it, with how far below.
CREATE FUNCTION compass_subtree(agent uuid) RETURNS TABLE (id uuid, depth integer)
LANGUAGE sql STABLE AS $$
  WITH RECURSIVE below (id, depth) AS (
    SELECT agent, 0
    UNION ALL
    SELECT a.id, b.depth + 1 FROM accounts a JOIN below b ON a.parent_id = b.id
    WHERE b.depth < compass_max_agent_depth()
  )
  SELECT id, depth FROM below
$$;

-- One change to an owner's trees at a time (every agent of a tree has the
-- tree's owner), so two moves can't make a cycle between them.
CREATE FUNCTION compass_lock_trees(owner uuid) RETURNS void
LANGUAGE sql AS $$
  SELECT pg_advisory_xact_lock(hashtextextended('compass.trees:' || owner::text, 0))
$$;

-- Refusals carry their own SQLSTATE (class CT) for the store to name:
-- CT001 a cycle, CT002 too deep, CT003 a full tree, CT004 not an agent of the
-- same owner, CT005 a chain written by hand, CT006 open asks would be left
-- behind.
CREATE FUNCTION compass_account_tree() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  parent accounts%ROWTYPE;
  height integer;
  moving integer;
  staying integer;
BEGIN
  IF TG_OP = 'UPDATE' AND NEW.owner_id IS DISTINCT FROM OLD.owner_id
     AND (NEW.parent_id IS NOT NULL OR EXISTS (SELECT 1 FROM accounts WHERE parent_id = NEW.id)) THEN
    RAISE EXCEPTION 'an agent in a tree keeps its owner' USING ERRCODE = 'CT004';
  END IF;
  IF TG_OP = 'UPDATE' AND NEW.parent_id IS NOT DISTINCT FROM OLD.parent_id THEN
    RETURN NEW;
  END IF;
  IF NEW.parent_id IS NULL THEN
    NEW.chain := ARRAY[NEW.id];
    NEW.attached_at := NULL;
    RETURN NEW;
  END IF;
  PERFORM compass_lock_trees(NEW.owner_id);
  -- Read after the lock: a move that committed meanwhile is seen.
  SELECT * INTO parent FROM accounts WHERE id = NEW.parent_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'no agent %', NEW.parent_id USING ERRCODE = 'foreign_key_violation';
  END IF;
  IF NEW.kind <> 'agent' OR parent.kind <> 'agent' OR parent.owner_id IS DISTINCT FROM NEW.owner_id
  THEN
    RAISE EXCEPTION 'a parent is an agent of the same owner' USING ERRCODE = 'CT004';
  END IF;
  IF NEW.id = ANY (parent.chain) THEN
    RAISE EXCEPTION 'agent % is above its new parent', NEW.id USING ERRCODE = 'CT001';
  END IF;
  SELECT max(s.depth), count(*) INTO height, moving FROM compass_subtree(NEW.id) s;
  IF cardinality(parent.chain) + height > compass_max_agent_depth() THEN
    RAISE EXCEPTION 'the tree would be deeper than % agents below its root',
      compass_max_agent_depth() USING ERRCODE = 'CT002';
  END IF;
  SELECT count(*) INTO staying FROM compass_subtree(parent.chain[cardinality(parent.chain)]) s
    WHERE s.id NOT IN (SELECT m.id FROM compass_subtree(NEW.id) m);
  IF staying + moving > compass_max_tree_agents() THEN
    RAISE EXCEPTION 'the tree would hold more than % agents', compass_max_tree_agents()
      USING ERRCODE = 'CT003';
  END IF;
  NEW.chain := NEW.id || parent.chain;
  NEW.attached_at := now();
  RETURN NEW;
END
$$;
CREATE TRIGGER accounts_tree BEFORE INSERT OR UPDATE OF parent_id, owner_id ON accounts
  FOR EACH ROW EXECUTE FUNCTION compass_account_tree();

-- The agents below one that moved take their new chain.
CREATE FUNCTION compass_account_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.parent_id IS DISTINCT FROM OLD.parent_id THEN
    UPDATE accounts d SET chain = d.chain[1:array_position(d.chain, NEW.id) - 1] || NEW.chain
    WHERE d.id IN (SELECT s.id FROM compass_subtree(NEW.id) s WHERE s.depth > 0)
      AND NEW.id = ANY (d.chain);
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER accounts_moved AFTER UPDATE OF parent_id ON accounts
  FOR EACH ROW EXECUTE FUNCTION compass_account_moved();

-- Only the triggers above write a chain.
CREATE FUNCTION compass_account_chain_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.chain IS DISTINCT FROM OLD.chain AND pg_trigger_depth() < 2 THEN
    RAISE EXCEPTION 'a chain follows the parents; set parent_id instead' USING ERRCODE = 'CT005';
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER accounts_chain_guard BEFORE UPDATE OF chain ON accounts
  FOR EACH ROW EXECUTE FUNCTION compass_account_chain_guard();

-- Who takes part in which channel: an account, every channel that it or an
-- agent above it is a member of (through that member), and since when (the
-- member joined and every link below it was made).
CREATE VIEW compass_participation WITH (security_invoker = true) AS
  SELECT a.id AS account_id, cm.channel_id, cm.account_id AS member_id,
         greatest(cm.joined_at, (
           SELECT max(b.attached_at) FROM accounts b WHERE b.id = ANY (a.chain[1:l.n - 1])
         )) AS since
  FROM accounts a
  CROSS JOIN LATERAL unnest(a.chain) WITH ORDINALITY AS l (member_id, n)
  JOIN channel_members cm ON cm.account_id = l.member_id;
GRANT SELECT ON compass_participation TO compass_app;

-- Moves an agent under another (NULL: makes it a root), with the agents
-- below it. Refused while it or an agent below it has an open channel ask:
-- an ask stays in the channel it was asked in, where the agent may no longer
-- be. Returns {status: moved | unchanged | no_agent}.
CREATE FUNCTION compass_reparent_agent(agent uuid, parent uuid) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  moved accounts%ROWTYPE;
  asking accounts%ROWTYPE;
  last_id bigint;
BEGIN
  SELECT * INTO moved FROM accounts WHERE id = agent AND kind = 'agent';
  IF NOT FOUND THEN
    RETURN jsonb_build_object('status', 'no_agent');
  END IF;
  -- Before any row lock, as every tree change takes them.
  PERFORM compass_lock_trees(moved.owner_id);
  -- Locks the agent and (through the cascade) every agent below it, after
  -- any post of theirs in flight.
  UPDATE accounts SET parent_id = parent WHERE id = agent AND parent_id IS DISTINCT FROM parent;
  IF NOT FOUND THEN
    RETURN jsonb_build_object('status', 'unchanged');
  END IF;
  SELECT a.* INTO asking FROM accounts a
    WHERE a.id IN (SELECT s.id FROM compass_subtree(agent) s) AND a.open_asks > 0
    ORDER BY a.handle LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'agent % has % open asks', asking.handle, asking.open_asks
      USING ERRCODE = 'CT006', DETAIL = jsonb_build_object(
        'handle', asking.handle, 'open_asks', asking.open_asks)::text;
  END IF;
  last_id := compass_append_events(ARRAY['agent_moved'], ARRAY[NULL::uuid],
    ARRAY[jsonb_build_object('account_id', agent, 'parent_id', parent)]);
  RETURN jsonb_build_object('status', 'moved', 'numbered', last_id IS NOT NULL);
END
$$;

ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (
  kind IN (
    'message_posted', 'message_updated', 'presence_changed', 'channel_changed',
    'inbox_item_changed', 'agent_moved'
  )
);

-- The account a request acts as: the one its transaction names in
-- compass.actor, if its credential vouches for it (the credential's own
-- account, or an agent assigned to the credential's runner) and still signs
-- in. NULL otherwise, and for the operator. Every name is qualified: it runs
-- as the owner with the caller's search_path.
CREATE FUNCTION compass_actor() RETURNS uuid
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
DECLARE
  named pg_catalog.uuid :=
    nullif(pg_catalog.current_setting('compass.actor', true), '')::pg_catalog.uuid;
  vouched pg_catalog.uuid;
BEGIN
  IF named IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT named INTO vouched FROM public.credentials c
    WHERE c.token_hash OPERATOR(pg_catalog.=) pg_catalog.decode(
        pg_catalog.current_setting('compass.credential', true), 'hex')
      AND (c.revoked_at IS NULL OR c.revoked_at OPERATOR(pg_catalog.>=) pg_catalog.now())
      AND (c.expires_at IS NULL OR c.expires_at OPERATOR(pg_catalog.>) pg_catalog.now())
      AND (c.account_id OPERATOR(pg_catalog.=) named OR EXISTS (
        SELECT 1 FROM public.runner_agents ra
        WHERE ra.runner_id OPERATOR(pg_catalog.=) c.runner_id
          AND ra.agent_id OPERATOR(pg_catalog.=) named));
  RETURN vouched;
END
$$;
REVOKE ALL ON FUNCTION compass_actor() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_actor() TO compass_app, compass_maintenance;

-- Scopes the transaction to the caller's credential and names the account
-- it acts as; returns the workspace (NULL: the credential scopes nothing).
CREATE FUNCTION compass_scope(cred bytea, actor uuid) RETURNS uuid
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('compass.actor', coalesce(actor::text, ''), true);
  RETURN compass_scope(cred);
END
$$;

-- Row-level security holds channels, their messages and asks' records to
-- the accounts that take part in them, on top of the workspace (the
-- operator's compass_maintenance reads none of these tables).
CREATE POLICY participating_read ON channels AS RESTRICTIVE FOR SELECT
  TO compass_app
  USING (EXISTS (SELECT 1 FROM compass_participation p
                 WHERE p.account_id = (SELECT compass_actor()) AND p.channel_id = channels.id));
CREATE POLICY participating_update ON channels AS RESTRICTIVE FOR UPDATE
  TO compass_app
  USING (EXISTS (SELECT 1 FROM compass_participation p
                 WHERE p.account_id = (SELECT compass_actor()) AND p.channel_id = channels.id));
CREATE POLICY participating_delete ON channels AS RESTRICTIVE FOR DELETE
  TO compass_app
  USING (EXISTS (SELECT 1 FROM compass_participation p
                 WHERE p.account_id = (SELECT compass_actor()) AND p.channel_id = channels.id));
CREATE POLICY participating_read ON messages AS RESTRICTIVE FOR SELECT
  TO compass_app
  USING (EXISTS (SELECT 1 FROM compass_participation p
                 WHERE p.account_id = (SELECT compass_actor())
                   AND p.channel_id = messages.channel_id));
CREATE POLICY participating_write ON messages AS RESTRICTIVE FOR INSERT
  TO compass_app
  WITH CHECK (EXISTS (SELECT 1 FROM compass_participation p
                      WHERE p.account_id = (SELECT compass_actor())
                        AND p.channel_id = messages.channel_id));
CREATE POLICY participating_update ON messages AS RESTRICTIVE FOR UPDATE
  TO compass_app
  USING (EXISTS (SELECT 1 FROM compass_participation p
                 WHERE p.account_id = (SELECT compass_actor())
                   AND p.channel_id = messages.channel_id));
CREATE POLICY participating_delete ON messages AS RESTRICTIVE FOR DELETE
  TO compass_app
  USING (EXISTS (SELECT 1 FROM compass_participation p
                 WHERE p.account_id = (SELECT compass_actor())
                   AND p.channel_id = messages.channel_id));
CREATE POLICY participating_read ON ask_history AS RESTRICTIVE FOR SELECT
  TO compass_app
  USING (EXISTS (SELECT 1 FROM asks a JOIN messages m ON m.id = a.message_id
                 WHERE a.ask_id = ask_history.ask_id));

-- The writes, gated by participation.

-- Posts a message for an account that takes part in the channel; NULL when
-- it doesn't, {unscoped} when the credential scopes nothing. Each ask is
-- indexed with its due time and recorded as posted.
CREATE OR REPLACE FUNCTION compass_post_message(
  cred bytea, message_id uuid, channel uuid, author uuid, body jsonb, words text, ask_ids text[],
  due timestamptz[], surface text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  ws uuid;
  last_id bigint;
  m messages%ROWTYPE;
  msg jsonb;
  change jsonb;
BEGIN
  ws := compass_scope(cred, author);
  IF ws IS NULL THEN
    RETURN jsonb_build_object('unscoped', true);
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
    WHERE EXISTS (
      SELECT 1 FROM compass_participation p WHERE p.account_id = author AND p.channel_id = channel)
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

-- The ask's message locked for a read-modify-write, if the actor takes part
-- in its channel, with the position of the ask block in it.
CREATE OR REPLACE FUNCTION compass_lock_ask(ask text, actor uuid, OUT m messages, OUT idx int)
LANGUAGE plpgsql AS $$
BEGIN
  SELECT msg.* INTO m FROM asks a
    JOIN messages msg ON msg.id = a.message_id
    WHERE a.ask_id = ask
      AND EXISTS (SELECT 1 FROM compass_participation p
                  WHERE p.account_id = actor AND p.channel_id = msg.channel_id)
    FOR UPDATE OF msg;
  IF m.id IS NULL THEN
    RETURN;
  END IF;
  SELECT i - 1 INTO idx FROM jsonb_array_elements(m.blocks) WITH ORDINALITY AS b(block, i)
    WHERE block ->> 'kind' = 'ask' AND block -> 'ask' ->> 'ask_id' = ask;
END
$$;

-- Where an ask stands for a reader, without a lock: for the error path.
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
    AND EXISTS (SELECT 1 FROM compass_participation p
                WHERE p.account_id = actor AND p.channel_id = m.channel_id)
$$;

-- As in 0009, with the ask's message as the update returns it (one read
-- of the row fewer).
CREATE OR REPLACE FUNCTION compass_write_ending(
  m messages, idx int, kind text, actor uuid, surface text, reason text,
  answered jsonb DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  stored jsonb := m.blocks -> idx -> 'ask';
  ask text := stored ->> 'ask_id';
  ending jsonb;
  asked jsonb;
  written messages%ROWTYPE;
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
    WHERE id = m.id RETURNING * INTO written;
  IF stored ? 'deadline' THEN
    UPDATE asks SET due_at = NULL WHERE ask_id = ask;
  END IF;
  INSERT INTO ask_history (workspace_id, ask_id, kind, actor_id, surface, reason, at)
    VALUES (m.workspace_id, ask, kind, actor, surface, coalesce(reason, ''), now());
  RETURN compass_message_json(written, (SELECT handle FROM accounts WHERE id = m.author_id));
END
$$;

-- The answer and the other endings of 0013, naming their actor for
-- row-level security.
CREATE OR REPLACE FUNCTION compass_answer_ask(
  cred bytea, actor uuid, ask text, answered jsonb, answer_id uuid, surface text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
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
  ws := compass_scope(cred, actor);
  IF ws IS NULL THEN
    RETURN jsonb_build_object('status', 'unscoped');
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
LANGUAGE plpgsql AS $$
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
  ws := compass_scope(cred, actor);
  IF ws IS NULL THEN
    RETURN jsonb_build_object('status', 'unscoped');
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
