-- The database as the last line: a request can't reach another workspace
-- even when the code above it is wrong.
--
-- 1. The scope is proven, not claimed. The request path (compass_app) used to
-- name its workspace in compass.workspace_id, which any statement could set
-- to any workspace. Now it names its caller's credential (the SHA-256 digest
-- of the token it signed in with) in compass.credential, and
-- compass_workspace() reads the workspace from that credential. compass_app
-- can't read credentials at all, so the only digests it can name are those
-- of the callers it serves. Policies call compass_workspace() once per
-- statement (an InitPlan), not once per row.
--
-- 2. Cross-workspace references are impossible: every reference between
-- workspace rows carries the workspace (a composite foreign key), so a row of
-- workspace A can't point at a row of B whoever writes it.
--
-- 3. Maintenance (reaping silent servers, numbering leftovers, the server
-- registry) and administration (workspaces, accounts, runners, credentials)
-- belong to compass_maintenance; compass_app can't call or write them.

DO $$
BEGIN
  CREATE ROLE compass_maintenance NOLOGIN;
EXCEPTION WHEN duplicate_object THEN NULL;
END
$$;
GRANT compass_maintenance TO CURRENT_USER;

-- 1. The scope, from the credential. Every name is qualified: it runs as the
-- owner with the caller's search_path.
CREATE OR REPLACE FUNCTION compass_workspace() RETURNS uuid
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
DECLARE
  ws pg_catalog.uuid;
BEGIN
  SELECT c.workspace_id INTO ws FROM public.credentials c
    WHERE c.token_hash OPERATOR(pg_catalog.=) pg_catalog.decode(
      pg_catalog.current_setting('compass.credential', true), 'hex');
  RETURN ws;
END
$$;

DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY[
    'accounts', 'runners', 'runner_agents', 'credentials', 'channels', 'channel_members', 'messages', 'asks', 'events', 'agent_sessions', 'delivery_cursors', 'inbox_items', 'inbox_messages', 'inbox_files', 'inbox_grants', 'event_counters'
  ] LOOP
    EXECUTE format('DROP POLICY workspace_only ON %I', t);
    EXECUTE format(
      'CREATE POLICY workspace_only ON %I TO compass_app '
      'USING (workspace_id = (SELECT compass_workspace())) '
      'WITH CHECK (workspace_id = (SELECT compass_workspace()))', t);
  END LOOP;
END
$$;
DROP POLICY workspace_only ON workspaces;
CREATE POLICY workspace_only ON workspaces TO compass_app
  USING (id = (SELECT compass_workspace())) WITH CHECK (id = (SELECT compass_workspace()));

-- The event log is appended to a named workspace (the caller's, or, for the
-- owner's reaping, the agent's); row-level security still holds the caller
-- to its own.
CREATE FUNCTION compass_append_events_to(
  ws uuid, kinds text[], channel_ids uuid[], payloads jsonb[]
)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  last_id bigint;
  n int := coalesce(array_length(kinds, 1), 0);
BEGIN
  IF n = 0 THEN
    RETURN NULL;
  END IF;
  SELECT c.last_event_id INTO last_id FROM event_counters c
    WHERE c.workspace_id = ws FOR NO KEY UPDATE SKIP LOCKED;
  IF NOT FOUND THEN
    INSERT INTO events (workspace_id, kind, channel_id, payload)
      SELECT ws, kinds[i], channel_ids[i], payloads[i] FROM generate_series(1, n) AS i;
    RETURN NULL;
  END IF;
  IF EXISTS (SELECT 1 FROM events WHERE workspace_id = ws AND id IS NULL) THEN
    last_id := compass_number_pending(ws, last_id);
  END IF;
  INSERT INTO events (workspace_id, id, kind, channel_id, payload)
    SELECT ws, last_id + i, kinds[i], channel_ids[i], payloads[i] FROM generate_series(1, n) AS i;
  last_id := last_id + n;
  UPDATE event_counters SET last_event_id = last_id WHERE workspace_id = ws;
  PERFORM pg_notify('compass_events', ws::text || ':' || last_id::text);
  RETURN last_id;
END
$$;

CREATE OR REPLACE FUNCTION compass_append_events(kinds text[], channel_ids uuid[], payloads jsonb[])
RETURNS bigint
LANGUAGE sql AS $$
  SELECT compass_append_events_to(compass_workspace(), kinds, channel_ids, payloads)
$$;

-- The hot writes take the caller's credential where they took its workspace.
DROP FUNCTION compass_post_message(uuid, uuid, uuid, uuid, jsonb, text, text[]);
DROP FUNCTION compass_answer_ask(uuid, uuid, text, jsonb, uuid);
DROP FUNCTION compass_cancel_ask(uuid, uuid, text);

CREATE FUNCTION compass_post_message(
  cred bytea, message_id uuid, channel uuid, author uuid, body jsonb, words text, ask_ids text[]
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  ws uuid;
  last_id bigint;
  m messages%ROWTYPE;
  msg jsonb;
  change jsonb;
BEGIN
  PERFORM set_config('compass.credential', encode(cred, 'hex'), true);
  ws := compass_workspace();
  IF ws IS NULL THEN
    RETURN NULL;
  END IF;
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
    last_id := compass_append_events_to(ws, ARRAY['message_posted'], ARRAY[channel], ARRAY[msg]);
  ELSE
    last_id := compass_append_events_to(ws,
      ARRAY['message_posted', 'presence_changed'], ARRAY[channel, NULL], ARRAY[msg, change]);
  END IF;
  RETURN jsonb_build_object('message', msg, 'numbered', last_id IS NOT NULL);
END
$$;

CREATE FUNCTION compass_answer_ask(
  cred bytea, actor uuid, ask text, answered jsonb, answer_id uuid
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  ws uuid;
  last_id bigint;
  locked record;
  stored jsonb;
  asked jsonb;
  answer_row messages%ROWTYPE;
  ask_msg jsonb;
  answer_msg jsonb;
  change jsonb;
BEGIN
  PERFORM set_config('compass.credential', encode(cred, 'hex'), true);
  ws := compass_workspace();
  IF ws IS NULL THEN
    RETURN jsonb_build_object('status', 'not_found');
  END IF;
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
    last_id := compass_append_events_to(ws,
      ARRAY['message_updated', 'message_posted'],
      ARRAY[(locked.m).channel_id, (locked.m).channel_id], ARRAY[ask_msg, answer_msg]);
  ELSE
    last_id := compass_append_events_to(ws,
      ARRAY['message_updated', 'message_posted', 'presence_changed'],
      ARRAY[(locked.m).channel_id, (locked.m).channel_id, NULL],
      ARRAY[ask_msg, answer_msg, change]);
  END IF;
  RETURN jsonb_build_object('status', 'taken', 'ask_message', ask_msg, 'answer_message', answer_msg,
    'numbered', last_id IS NOT NULL);
END
$$;

CREATE FUNCTION compass_cancel_ask(cred bytea, actor uuid, ask text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  ws uuid;
  last_id bigint;
  locked record;
  stored jsonb;
  ask_msg jsonb;
  change jsonb;
BEGIN
  PERFORM set_config('compass.credential', encode(cred, 'hex'), true);
  ws := compass_workspace();
  IF ws IS NULL THEN
    RETURN jsonb_build_object('status', 'not_found');
  END IF;
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
    last_id := compass_append_events_to(ws,
      ARRAY['message_updated'], ARRAY[(locked.m).channel_id], ARRAY[ask_msg]);
  ELSE
    last_id := compass_append_events_to(ws,
      ARRAY['message_updated', 'presence_changed'], ARRAY[(locked.m).channel_id, NULL],
      ARRAY[ask_msg, change]);
  END IF;
  RETURN jsonb_build_object('status', 'changed', 'ask_message', ask_msg,
    'numbered', last_id IS NOT NULL);
END
$$;

-- Numbering a workspace's committed events after a write: the writer's
-- server does it for any workspace it wrote to. It reads and changes nothing
-- but the numbering, so it runs as the owner and tells the caller nothing.
CREATE FUNCTION compass_number_events(ws uuid) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
  SELECT compass_sequence_events(ws)
$$;
REVOKE ALL ON FUNCTION compass_sequence_events(uuid, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION compass_number_events(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_number_events(uuid) TO compass_app;

-- 2. References carry their workspace.
ALTER TABLE accounts ADD CONSTRAINT accounts_workspace_id_id_key UNIQUE (workspace_id, id);
ALTER TABLE runners ADD CONSTRAINT runners_workspace_id_id_key UNIQUE (workspace_id, id);
ALTER TABLE channels ADD CONSTRAINT channels_workspace_id_id_key UNIQUE (workspace_id, id);
ALTER TABLE messages ADD CONSTRAINT messages_workspace_id_id_key UNIQUE (workspace_id, id);
ALTER TABLE inbox_items ADD CONSTRAINT inbox_items_workspace_id_id_key UNIQUE (workspace_id, id);
ALTER TABLE inbox_messages
  ADD CONSTRAINT inbox_messages_workspace_id_id_key UNIQUE (workspace_id, id);

DO $$
DECLARE
  ref record;
BEGIN
  FOR ref IN SELECT * FROM (VALUES
    ('accounts', 'owner_id', 'accounts', ''),
    ('runner_agents', 'runner_id', 'runners', ''),
    ('runner_agents', 'agent_id', 'accounts', ''),
    ('credentials', 'account_id', 'accounts', ''),
    ('credentials', 'runner_id', 'runners', ''),
    ('channel_members', 'channel_id', 'channels', ''),
    ('channel_members', 'account_id', 'accounts', ''),
    ('messages', 'channel_id', 'channels', ''),
    ('messages', 'author_id', 'accounts', ''),
    ('asks', 'message_id', 'messages', ''),
    ('agent_sessions', 'agent_id', 'accounts', ''),
    ('agent_sessions', 'runner_id', 'runners', ''),
    ('delivery_cursors', 'agent_id', 'accounts', ''),
    ('inbox_items', 'agent_id', 'accounts', ''),
    ('inbox_items', 'answered_by', 'accounts', ''),
    ('inbox_items', 'closed_by', 'accounts', ''),
    ('inbox_items', 'ask_message_id', 'inbox_messages', ''),
    ('inbox_messages', 'item_id', 'inbox_items', ''),
    ('inbox_messages', 'author_id', 'accounts', ''),
    ('inbox_messages', 'answers_message_id', 'inbox_messages', ''),
    ('inbox_files', 'item_id', 'inbox_items', ''),
    ('inbox_files', 'message_id', 'inbox_messages', ' ON DELETE CASCADE'),
    ('inbox_grants', 'agent_id', 'accounts', ''),
    ('inbox_grants', 'account_id', 'accounts', '')
  ) AS r (tbl, col, target, action) LOOP
    EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', ref.tbl, ref.tbl || '_' || ref.col || '_fkey');
    EXECUTE format(
      'ALTER TABLE %I ADD CONSTRAINT %I FOREIGN KEY (workspace_id, %I) REFERENCES %I (workspace_id, id)%s',
      ref.tbl, ref.tbl || '_' || ref.col || '_fkey', ref.col, ref.target, ref.action);
  END LOOP;
END
$$;

-- 3. Maintenance and administration: compass_maintenance, never compass_app.
REVOKE ALL ON credentials, servers FROM compass_app;
REVOKE INSERT, UPDATE, DELETE ON workspaces, runners, runner_agents FROM compass_app;
REVOKE INSERT, DELETE ON accounts, event_counters FROM compass_app;

GRANT SELECT, INSERT ON workspaces, event_counters, accounts, credentials, runners, runner_agents
  TO compass_maintenance;
GRANT SELECT, INSERT, UPDATE, DELETE ON servers TO compass_maintenance;
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY[
    'workspaces', 'event_counters', 'accounts', 'credentials', 'runners', 'runner_agents'
  ] LOOP
    EXECUTE format(
      'CREATE POLICY maintenance ON %I TO compass_maintenance USING (true) WITH CHECK (true)', t);
  END LOOP;
END
$$;

-- Silent servers' sessions go, and their agents' presence is recomputed in
-- each agent's own workspace, in one transaction.
CREATE OR REPLACE FUNCTION compass_reap_stale_sessions(stale interval)
RETURNS TABLE (workspace_id uuid, agent_id uuid)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  change jsonb;
BEGIN
  FOR workspace_id, agent_id IN
    WITH dead AS (
      DELETE FROM servers WHERE heartbeat_at < now() - stale RETURNING id
    ), gone AS (
      DELETE FROM agent_sessions s USING dead WHERE s.server_id = dead.id
      RETURNING s.workspace_id, s.agent_id
    )
    SELECT DISTINCT g.workspace_id, g.agent_id FROM gone g ORDER BY 1, 2
  LOOP
    change := compass_presence_change(agent_id);
    IF change IS NOT NULL THEN
      PERFORM compass_append_events_to(
        workspace_id, ARRAY['presence_changed'], ARRAY[NULL::uuid], ARRAY[change]);
    END IF;
    RETURN NEXT;
  END LOOP;
END
$$;

REVOKE ALL ON FUNCTION compass_reap_stale_sessions(interval) FROM PUBLIC, compass_app;
REVOKE ALL ON FUNCTION compass_sequence_leftovers() FROM PUBLIC, compass_app;
REVOKE ALL ON FUNCTION compass_runner_workspace(uuid) FROM PUBLIC, compass_app;
GRANT EXECUTE ON FUNCTION compass_reap_stale_sessions(interval) TO compass_maintenance;
GRANT EXECUTE ON FUNCTION compass_sequence_leftovers() TO compass_maintenance;
GRANT EXECUTE ON FUNCTION compass_runner_workspace(uuid) TO compass_maintenance;
