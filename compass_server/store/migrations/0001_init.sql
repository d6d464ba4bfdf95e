-- The application runs as compass_app, which owns nothing, so row-level
-- security applies even when the connecting user is a superuser or the owner.
DO $$
BEGIN
  CREATE ROLE compass_app NOLOGIN;
EXCEPTION WHEN duplicate_object THEN NULL;
END
$$;

GRANT compass_app TO CURRENT_USER;

-- The workspace a transaction is scoped to; NULL (no rows) when unset.
CREATE FUNCTION compass_workspace() RETURNS uuid
LANGUAGE sql STABLE AS $$
  SELECT nullif(current_setting('compass.workspace_id', true), '')::uuid
$$;

CREATE TABLE workspaces (
  id uuid PRIMARY KEY,
  name text NOT NULL,
  -- The last event id handed out; the row lock on it orders the event log.
  event_seq bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE accounts (
  id uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  handle text NOT NULL,
  kind text NOT NULL CHECK (kind IN ('human', 'agent')),
  owner_id uuid REFERENCES accounts (id),
  -- The agent's own status from set_status.
  status text NOT NULL DEFAULT 'idle' CHECK (status IN ('idle', 'working')),
  status_text text NOT NULL DEFAULT '',
  -- The presence last published, so a recompute publishes only on change.
  presence_state text NOT NULL DEFAULT 'offline',
  presence_text text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, handle),
  CHECK ((kind = 'agent') = (owner_id IS NOT NULL))
);

CREATE TABLE runners (
  id uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE runner_agents (
  runner_id uuid NOT NULL REFERENCES runners (id),
  agent_id uuid NOT NULL REFERENCES accounts (id),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  PRIMARY KEY (runner_id, agent_id)
);

-- Tokens are stored as SHA-256 digests; the token itself is shown once.
CREATE TABLE credentials (
  token_hash bytea PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  account_id uuid REFERENCES accounts (id),
  runner_id uuid REFERENCES runners (id),
  created_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((account_id IS NULL) <> (runner_id IS NULL))
);

CREATE TABLE channels (
  id uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  name text NOT NULL,
  topic text NOT NULL DEFAULT '',
  kind text NOT NULL CHECK (kind IN ('channel', 'dm')),
  -- The two member ids in order, so a DM between two accounts is unique.
  dm_key text,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, dm_key)
);

CREATE TABLE channel_members (
  channel_id uuid NOT NULL REFERENCES channels (id),
  account_id uuid NOT NULL REFERENCES accounts (id),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  joined_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (channel_id, account_id)
);
CREATE INDEX channel_members_account ON channel_members (account_id, channel_id);

CREATE TABLE messages (
  id uuid PRIMARY KEY,
  -- Global insertion order: the stable sort and page key of a channel.
  position bigserial NOT NULL UNIQUE,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  channel_id uuid NOT NULL REFERENCES channels (id),
  author_id uuid NOT NULL REFERENCES accounts (id),
  blocks jsonb NOT NULL,
  -- Lower-cased words of text blocks and ask questions, for search.
  search_text text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX messages_channel_position ON messages (channel_id, position DESC);
-- WAITING: an agent's messages that hold an ask neither answered nor cancelled.
-- The predicate must match the presence query's text for the planner to use it.
CREATE INDEX messages_open_asks ON messages (author_id)
  WHERE jsonb_path_exists(
    blocks,
    '$[*] ? (@.kind == "ask" && !(@.ask.answered == true) && !(@.ask.cancelled == true))'
  );

-- ask_id → its message, written once at append; the ask's state stays in blocks.
CREATE TABLE asks (
  ask_id text PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  message_id uuid NOT NULL REFERENCES messages (id)
);

-- The event log: an event exists if and only if its change committed.
CREATE TABLE events (
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  id bigint NOT NULL,
  kind text NOT NULL CHECK (
    kind IN ('message_posted', 'message_updated', 'presence_changed', 'channel_changed')
  ),
  -- The audience: members of this channel, or the whole workspace when NULL.
  channel_id uuid,
  payload jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, id)
);

-- Runner sessions bound on some server process; none means OFFLINE.
CREATE TABLE agent_sessions (
  id uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  agent_id uuid NOT NULL REFERENCES accounts (id),
  runner_id uuid NOT NULL REFERENCES runners (id),
  server_id uuid NOT NULL,
  bound_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_sessions_agent ON agent_sessions (agent_id);
CREATE INDEX agent_sessions_server ON agent_sessions (server_id);

-- The delivery lane's acked cursor per agent.
CREATE TABLE delivery_cursors (
  agent_id uuid PRIMARY KEY REFERENCES accounts (id),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  acked_event_id bigint NOT NULL DEFAULT 0
);

-- Server processes sharing this database; a silent one's sessions are stale.
CREATE TABLE servers (
  id uuid PRIMARY KEY,
  heartbeat_at timestamptz NOT NULL DEFAULT now()
);

DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY[
    'accounts', 'runners', 'runner_agents', 'credentials', 'channels', 'channel_members',
    'messages', 'asks', 'events', 'agent_sessions', 'delivery_cursors'
  ] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format(
      'CREATE POLICY workspace_only ON %I USING (workspace_id = compass_workspace()) '
      'WITH CHECK (workspace_id = compass_workspace())', t);
  END LOOP;
END
$$;
ALTER TABLE workspaces ENABLE ROW LEVEL SECURITY;
CREATE POLICY workspace_only ON workspaces
  USING (id = compass_workspace()) WITH CHECK (id = compass_workspace());

GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO compass_app;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO compass_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
  GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO compass_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE ON SEQUENCES TO compass_app;
REVOKE ALL ON schema_migrations FROM compass_app;

-- Sign-in happens before the workspace is known: this one lookup, by digest,
-- runs as the owner and returns only what the token names.
CREATE FUNCTION compass_credential(digest bytea)
RETURNS TABLE (workspace_id uuid, account_id uuid, runner_id uuid, kind text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT c.workspace_id, c.account_id, c.runner_id, a.kind
  FROM credentials c LEFT JOIN accounts a ON a.id = c.account_id
  WHERE c.token_hash = digest
$$;
REVOKE ALL ON FUNCTION compass_credential(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_credential(bytea) TO compass_app;

-- Appends events to the log of the current workspace, in order, and wakes
-- listeners at commit. The workspace row lock is held until commit, so ids
-- commit in order and a reader's cursor never skips a later-committing id.
CREATE FUNCTION compass_append_events(kinds text[], channel_ids uuid[], payloads jsonb[])
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  last_id bigint;
  n int := coalesce(array_length(kinds, 1), 0);
BEGIN
  IF n = 0 THEN
    RETURN NULL;
  END IF;
  UPDATE workspaces SET event_seq = event_seq + n
    WHERE id = compass_workspace() RETURNING event_seq INTO last_id;
  INSERT INTO events (workspace_id, id, kind, channel_id, payload)
    SELECT compass_workspace(), last_id - n + i, kinds[i], channel_ids[i], payloads[i]
    FROM generate_series(1, n) AS i;
  PERFORM pg_notify('compass_events', compass_workspace()::text || ':' || last_id::text);
  RETURN last_id;
END
$$;

-- Recomputes an agent's presence and, when it moved, stores it and returns the
-- presence_changed payload (NULL otherwise). WAITING (an open ask it authored
-- in a channel it still belongs to) wins over OFFLINE (no bound session),
-- which wins over its own status. It appends nothing: a write appends all its
-- events last, so the workspace's event lock is always the last lock taken.
CREATE FUNCTION compass_presence_change(agent uuid) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  acct accounts%ROWTYPE;
  next_state text;
BEGIN
  -- NO KEY UPDATE: compatible with the key-share locks of rows referencing it.
  SELECT * INTO acct FROM accounts WHERE id = agent FOR NO KEY UPDATE;
  IF NOT FOUND OR acct.kind <> 'agent' THEN
    RETURN NULL;
  END IF;
  IF EXISTS (
    SELECT 1 FROM messages m
    JOIN channel_members cm ON cm.channel_id = m.channel_id AND cm.account_id = m.author_id
    WHERE m.author_id = agent
      AND jsonb_path_exists(
        m.blocks,
        '$[*] ? (@.kind == "ask" && !(@.ask.answered == true) && !(@.ask.cancelled == true))'
      )
  ) THEN
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

-- For a write whose only event is the presence change: recompute and append.
CREATE FUNCTION compass_refresh_presence(agent uuid) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  change jsonb := compass_presence_change(agent);
BEGIN
  IF change IS NULL THEN
    RETURN false;
  END IF;
  PERFORM compass_append_events(ARRAY['presence_changed'], ARRAY[NULL::uuid], ARRAY[change]);
  RETURN true;
END
$$;

-- The operator's assign-agent names only the runner; this finds its workspace.
CREATE FUNCTION compass_runner_workspace(runner uuid) RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT workspace_id FROM runners WHERE id = runner
$$;
REVOKE ALL ON FUNCTION compass_runner_workspace(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_runner_workspace(uuid) TO compass_app;
