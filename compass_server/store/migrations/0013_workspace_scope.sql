-- The database as the last line: a request can't reach another workspace
-- even when the code above it is wrong.
--
-- 1. The scope is proven, not claimed. The request path (compass_app) used to
-- name its workspace in compass.workspace_id, which any statement could set
-- to any workspace. Now it names its caller's credential (the SHA-256 digest
-- of the token it signed in with) in compass.credential, and
-- compass_workspace() reads the workspace from that credential, if it is
-- neither revoked nor expired. compass_app can't read credentials' digests,
-- so the only ones it can name are those of the callers it serves. Policies
-- call compass_workspace() once per statement (an InitPlan), not per row.
--
-- 2. Cross-workspace references are impossible: every reference between
-- workspace rows carries the workspace (a composite foreign key), so a row of
-- workspace A can't point at a row of B whoever writes it.
--
-- 3. Work across workspaces (reaping silent servers, numbering leftovers,
-- expiring asks, the server registry and its revocation bookkeeping) and the
-- operator's administration belong to compass_maintenance; compass_app can't
-- call or write them.

DO $$
BEGIN
  CREATE ROLE compass_maintenance NOLOGIN;
EXCEPTION WHEN duplicate_object THEN NULL;
END
$$;
GRANT compass_maintenance TO CURRENT_USER;

-- 1. The scope, from the credential, while it still signs in: a revoked or
-- expired credential scopes nothing (one revoked by this very transaction
-- still scopes it to its end, so an admin who revokes their own token reads
-- the result). Every name is qualified: it runs as the owner with the
-- caller's search_path.
CREATE FUNCTION compass_credential_workspace() RETURNS uuid
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
DECLARE
  ws pg_catalog.uuid;
BEGIN
  SELECT c.workspace_id INTO ws FROM public.credentials c
    WHERE c.token_hash OPERATOR(pg_catalog.=) pg_catalog.decode(
        pg_catalog.current_setting('compass.credential', true), 'hex')
      AND (c.revoked_at IS NULL OR c.revoked_at OPERATOR(pg_catalog.>=) pg_catalog.now())
      AND (c.expires_at IS NULL OR c.expires_at OPERATOR(pg_catalog.>) pg_catalog.now());
  RETURN ws;
END
$$;
REVOKE ALL ON FUNCTION compass_credential_workspace() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_credential_workspace() TO compass_app, compass_maintenance;

-- The request path's workspace is its credential's. The operator at the
-- command line has no credential: compass_maintenance (never compass_app)
-- names the workspace it works on in compass.operator_workspace.
CREATE OR REPLACE FUNCTION compass_workspace() RETURNS uuid
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN current_user = 'compass_maintenance'
    THEN nullif(pg_catalog.current_setting('compass.operator_workspace', true), '')::uuid
    ELSE public.compass_credential_workspace()
  END
$$;

-- Scopes the transaction to the caller's credential; returns its workspace,
-- NULL when the credential scopes nothing (unknown, revoked or expired).
CREATE FUNCTION compass_scope(cred bytea) RETURNS uuid
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('compass.credential', encode(cred, 'hex'), true);
  RETURN compass_workspace();
END
$$;

DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY[
    'accounts', 'runners', 'runner_agents', 'credentials', 'channels', 'channel_members',
    'messages', 'asks', 'events', 'agent_sessions', 'delivery_cursors', 'inbox_items',
    'inbox_messages', 'inbox_files', 'inbox_grants', 'event_counters', 'ask_history'
  ] LOOP
    EXECUTE format('DROP POLICY workspace_only ON %I', t);
    EXECUTE format(
      'CREATE POLICY workspace_only ON %I TO compass_app, compass_maintenance '
      'USING (workspace_id = (SELECT compass_workspace())) '
      'WITH CHECK (workspace_id = (SELECT compass_workspace()))', t);
  END LOOP;
END
$$;
DROP POLICY workspace_only ON workspaces;
CREATE POLICY workspace_only ON workspaces TO compass_app, compass_maintenance
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

-- The hot writes take the caller's credential where they took its workspace,
-- and append to the workspace it proves.
DROP FUNCTION compass_post_message(
  uuid, uuid, uuid, uuid, jsonb, text, text[], timestamptz[], text);
DROP FUNCTION compass_answer_ask(uuid, uuid, text, jsonb, uuid, text);
DROP FUNCTION compass_end_ask(uuid, uuid, text, text, text, text);
DROP FUNCTION compass_append_ending(uuid, jsonb, jsonb, jsonb);

-- Appends an ending's events to workspace `ws`: the ask's MessageUpdated,
-- the answer's MessagePosted when there is one, and the agent's presence
-- change when it moved. Returns the last event id, NULL when they are left
-- to number after commit.
CREATE FUNCTION compass_append_ending(
  ws uuid, channel uuid, ask_msg jsonb, change jsonb, answer_msg jsonb DEFAULT NULL
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
  RETURN compass_append_events_to(ws, kinds, channels, payloads);
END
$$;

-- Posts a message for a member of the channel; NULL when the author isn't
-- one, {unscoped} when the credential scopes nothing. Each ask is indexed
-- with its due time and recorded as posted.
CREATE FUNCTION compass_post_message(
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
  ws := compass_scope(cred);
  IF ws IS NULL THEN
    RETURN jsonb_build_object('unscoped', true);
  END IF;
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
    last_id := compass_append_events_to(ws, ARRAY['message_posted'], ARRAY[channel], ARRAY[msg]);
  ELSE
    last_id := compass_append_events_to(ws,
      ARRAY['message_posted', 'presence_changed'], ARRAY[channel, NULL], ARRAY[msg, change]);
  END IF;
  RETURN jsonb_build_object('message', msg, 'numbered', last_id IS NOT NULL);
END
$$;

-- Answers an ask. `answered` is the ask's questions with their answer state,
-- checked by the caller; its content must be the stored content. Refusals in
-- the order credential, visibility, permission, state. Returns {status} and,
-- when taken, the ask's message and the answer message.
CREATE FUNCTION compass_answer_ask(
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
  ws := compass_scope(cred);
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

-- Ends an ask without an answer, for a person or an agent: 'declined' (who
-- may answer may decline), 'withdrawn_by_agent' (its author only) or
-- 'withdrawn_by_owner' (the owner of its agent only). Refusals in the order
-- visibility, permission, state; a repeat of the same withdraw is {status:
-- unchanged} with no write and no event.
CREATE FUNCTION compass_end_ask(
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
  ws := compass_scope(cred);
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

-- The expiry sweep works across workspaces, so it is maintenance's: each
-- ask's events go to its own workspace's log, named, not scoped. Otherwise
-- as before: SKIP LOCKED so servers sweeping at once never meet, the state
-- checked again on the locked row, account locks in author order, one
-- transaction.
CREATE OR REPLACE FUNCTION compass_expire_due_asks(batch int) RETURNS jsonb
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
    SELECT * INTO m FROM messages WHERE id = due.message_id;
    SELECT i - 1 INTO idx FROM jsonb_array_elements(m.blocks) WITH ORDINALITY AS b(block, i)
      WHERE block ->> 'kind' = 'ask' AND block -> 'ask' ->> 'ask_id' = due.ask_id;
    IF compass_ask_standing(m.blocks -> idx -> 'ask') <> 'open' THEN
      UPDATE asks SET due_at = NULL WHERE ask_id = due.ask_id;
      CONTINUE;
    END IF;
    ask_msg := compass_write_ending(m, idx, 'expired', NULL, 'server', NULL);
    change := compass_presence_change(m.author_id, -1);
    last_id := compass_append_ending(due.workspace_id, m.channel_id, ask_msg, change);
    expired := expired + 1;
    IF last_id IS NULL AND NOT due.workspace_id = ANY(unnumbered) THEN
      unnumbered := unnumbered || due.workspace_id;
    END IF;
  END LOOP;
  RETURN jsonb_build_object('expired', expired, 'unnumbered', to_jsonb(unnumbered));
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
ALTER TABLE credentials ADD CONSTRAINT credentials_workspace_id_id_key UNIQUE (workspace_id, id);
ALTER TABLE channels ADD CONSTRAINT channels_workspace_id_id_key UNIQUE (workspace_id, id);
ALTER TABLE messages ADD CONSTRAINT messages_workspace_id_id_key UNIQUE (workspace_id, id);
ALTER TABLE asks ADD CONSTRAINT asks_workspace_id_ask_id_key UNIQUE (workspace_id, ask_id);
ALTER TABLE inbox_items ADD CONSTRAINT inbox_items_workspace_id_id_key UNIQUE (workspace_id, id);
ALTER TABLE inbox_messages
  ADD CONSTRAINT inbox_messages_workspace_id_id_key UNIQUE (workspace_id, id);

DO $$
DECLARE
  ref record;
BEGIN
  FOR ref IN SELECT * FROM (VALUES
    ('accounts', 'owner_id', 'accounts', 'id', ''),
    ('runner_agents', 'runner_id', 'runners', 'id', ''),
    ('runner_agents', 'agent_id', 'accounts', 'id', ''),
    ('credentials', 'account_id', 'accounts', 'id', ''),
    ('credentials', 'runner_id', 'runners', 'id', ''),
    ('credentials', 'replaced_by', 'credentials', 'id', ''),
    ('channel_members', 'channel_id', 'channels', 'id', ''),
    ('channel_members', 'account_id', 'accounts', 'id', ''),
    ('messages', 'channel_id', 'channels', 'id', ''),
    ('messages', 'author_id', 'accounts', 'id', ''),
    ('asks', 'message_id', 'messages', 'id', ''),
    ('ask_history', 'ask_id', 'asks', 'ask_id', ''),
    ('ask_history', 'actor_id', 'accounts', 'id', ''),
    ('agent_sessions', 'agent_id', 'accounts', 'id', ''),
    ('agent_sessions', 'runner_id', 'runners', 'id', ''),
    ('delivery_cursors', 'agent_id', 'accounts', 'id', ''),
    ('inbox_items', 'agent_id', 'accounts', 'id', ''),
    ('inbox_items', 'answered_by', 'accounts', 'id', ''),
    ('inbox_items', 'closed_by', 'accounts', 'id', ''),
    ('inbox_items', 'ask_message_id', 'inbox_messages', 'id', ''),
    ('inbox_messages', 'item_id', 'inbox_items', 'id', ''),
    ('inbox_messages', 'author_id', 'accounts', 'id', ''),
    ('inbox_messages', 'answers_message_id', 'inbox_messages', 'id', ''),
    ('inbox_files', 'item_id', 'inbox_items', 'id', ''),
    ('inbox_files', 'message_id', 'inbox_messages', 'id', ' ON DELETE CASCADE'),
    ('inbox_grants', 'agent_id', 'accounts', 'id', ''),
    ('inbox_grants', 'account_id', 'accounts', 'id', '')
  ) AS r (tbl, col, target, key, action) LOOP
    EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', ref.tbl, ref.tbl || '_' || ref.col || '_fkey');
    EXECUTE format(
      'ALTER TABLE %I ADD CONSTRAINT %I FOREIGN KEY (workspace_id, %I) '
      'REFERENCES %I (workspace_id, %I)%s',
      ref.tbl, ref.tbl || '_' || ref.col || '_fkey', ref.col, ref.target, ref.key, ref.action);
  END LOOP;
END
$$;

-- 3. Who may do what. The request path (compass_app) keeps what a
-- workspace's own calls need, an admin's included (accounts, runners,
-- assignments, tokens), all held to its workspace by the policies above;
-- it may write no workspace, no event counter, no server, and it reads no
-- credential's digest: the digests it can name are only those it was given.
REVOKE ALL ON credentials, servers FROM compass_app;
REVOKE INSERT, UPDATE, DELETE ON workspaces FROM compass_app;
REVOKE UPDATE, DELETE ON runners FROM compass_app;
REVOKE DELETE ON accounts FROM compass_app;
REVOKE INSERT, DELETE ON event_counters FROM compass_app;
-- An admin's change of roles locks its workspace's row.
GRANT UPDATE (name) ON workspaces TO compass_app;
GRANT SELECT (
  id, workspace_id, account_id, runner_id, label, created_at, expires_at, revoked_at,
  replaced_by, last_used_at
) ON credentials TO compass_app;
GRANT INSERT (token_hash, id, workspace_id, account_id, runner_id, label, expires_at)
  ON credentials TO compass_app;
GRANT UPDATE (revoked_at, replaced_by, expires_at) ON credentials TO compass_app;

-- compass_maintenance: the operator's administration of the workspace it
-- names (the same policies hold it there), and the servers' own work across
-- workspaces, which runs only through the functions granted below.
GRANT SELECT, INSERT, UPDATE ON workspaces, event_counters, events, accounts, credentials
  TO compass_maintenance;
GRANT SELECT, INSERT ON runners TO compass_maintenance;
GRANT SELECT, INSERT, DELETE ON runner_agents TO compass_maintenance;
GRANT SELECT, DELETE ON agent_sessions TO compass_maintenance;
GRANT SELECT ON inbox_items TO compass_maintenance;
GRANT SELECT, INSERT, UPDATE, DELETE ON servers TO compass_maintenance;
GRANT USAGE, SELECT ON SEQUENCE compass_access_seq TO compass_maintenance;

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

-- A server ends a session it bound, when its runner unbinds it or its stream
-- ends, whatever became of the runner's credential meanwhile (a revoked
-- token ends the stream, and its sessions must still go). Only the calling
-- server's sessions, by id; the agent's presence is recomputed in its
-- workspace, which is returned when it moved.
CREATE FUNCTION compass_end_session(server uuid, session uuid) RETURNS uuid
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  gone agent_sessions%ROWTYPE;
  change jsonb;
BEGIN
  DELETE FROM agent_sessions s WHERE s.id = session AND s.server_id = server RETURNING * INTO gone;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  change := compass_presence_change(gone.agent_id);
  IF change IS NULL THEN
    RETURN NULL;
  END IF;
  PERFORM compass_append_events_to(
    gone.workspace_id, ARRAY['presence_changed'], ARRAY[NULL::uuid], ARRAY[change]);
  RETURN gone.workspace_id;
END
$$;

-- A server's re-check of the streams it holds, in every workspace: the
-- seconds each token has left (NULL: no expiry); revoked, expired and
-- unknown ones are missing.
CREATE FUNCTION compass_token_states(ids uuid[])
RETURNS TABLE (id uuid, expires_in double precision)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT c.id, extract(epoch FROM c.expires_at - now())::double precision
  FROM credentials c
  WHERE c.id = ANY(ids) AND c.revoked_at IS NULL
    AND (c.expires_at IS NULL OR c.expires_at > now())
$$;

-- The operator's command line names ids, not workspaces: the workspace an
-- account, runner or token belongs to.
CREATE FUNCTION compass_workspace_of(object_id uuid) RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT workspace_id FROM (
    SELECT workspace_id FROM accounts WHERE id = object_id
    UNION ALL SELECT workspace_id FROM runners WHERE id = object_id
    UNION ALL SELECT workspace_id FROM credentials WHERE id = object_id
  ) found LIMIT 1
$$;

-- Found by compass_workspace_of now.
DROP FUNCTION compass_runner_workspace(uuid);

DO $$
DECLARE
  f text;
BEGIN
  FOREACH f IN ARRAY ARRAY[
    'compass_reap_stale_sessions(interval)', 'compass_sequence_leftovers()',
    'compass_expire_due_asks(int)', 'compass_next_ask_deadline()',
    'compass_token_states(uuid[])', 'compass_workspace_of(uuid)',
    'compass_end_session(uuid, uuid)'
  ] LOOP
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC, compass_app', f);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO compass_maintenance', f);
  END LOOP;
END
$$;
