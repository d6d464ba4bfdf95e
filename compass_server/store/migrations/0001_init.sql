-- The application runs as compass_app, which owns nothing, so row-level
-- security applies even when the connecting user is a superuser or the owner.
DO $$
BEGIN
  CREATE ROLE compass_app NOLOGIN;
EXCEPTION WHEN duplicate_object THEN NULL;
END
$$;

GRANT compass_app TO CURRENT_USER;

-- The servers' own work across workspaces and the operator's (0013), and
-- the role the hot write functions run as (0019): made here, so that every
-- function's file can say who may call it whenever it is applied.
DO $$
BEGIN
  CREATE ROLE compass_maintenance NOLOGIN;
EXCEPTION WHEN duplicate_object THEN NULL;
END
$$;
GRANT compass_maintenance TO CURRENT_USER;
DO $$
BEGIN
  CREATE ROLE compass_writer NOLOGIN;
EXCEPTION WHEN duplicate_object THEN NULL;
END
$$;
GRANT compass_writer TO CURRENT_USER;

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
  END LOOP;
END
$$;
ALTER TABLE workspaces ENABLE ROW LEVEL SECURITY;

GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO compass_app;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO compass_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
  GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO compass_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE ON SEQUENCES TO compass_app;
REVOKE ALL ON schema_migrations FROM compass_app;
