-- Agents' inboxes: per agent, items keyed by the agent's key, each a thread of
-- messages where the agent's newest ask replaces the ones before it.

-- An item stands for its newest ask (ask_message_id); status follows that
-- ask, and a note (never asked) waits on nobody. The revision moves only when
-- the agent asks: a post with an ask, or its own close.
CREATE TABLE inbox_items (
  id uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  agent_id uuid NOT NULL REFERENCES accounts (id),
  key text NOT NULL,
  title text NOT NULL,
  status text NOT NULL CHECK (status IN ('open', 'answered', 'closed', 'note')),
  revision bigint NOT NULL DEFAULT 0,
  ask_message_id uuid,
  answered_by uuid REFERENCES accounts (id),
  closed_by uuid REFERENCES accounts (id),
  settled_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, agent_id, key),
  CHECK ((status = 'note') = (ask_message_id IS NULL)),
  CHECK ((status = 'answered') = (answered_by IS NOT NULL)),
  CHECK ((status = 'closed') = (closed_by IS NOT NULL)),
  CHECK ((status = 'open') = (settled_at IS NULL))
);
-- MAX_OPEN_PER_AGENT counts these.
CREATE INDEX inbox_items_open ON inbox_items (agent_id) WHERE status = 'open';
CREATE INDEX inbox_items_recent ON inbox_items (agent_id, updated_at DESC, id DESC);

-- A message's blocks are written once: its text, then its ask or the answered
-- snapshot. An ask's standing lives beside them in ask_status, so nothing
-- rewrites an ask's content.
CREATE TABLE inbox_messages (
  id uuid PRIMARY KEY,
  position bigserial NOT NULL UNIQUE,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  item_id uuid NOT NULL REFERENCES inbox_items (id),
  author_id uuid NOT NULL REFERENCES accounts (id),
  blocks jsonb NOT NULL,
  ask_id text UNIQUE,
  ask_status text CHECK (ask_status IN ('open', 'replaced', 'answered', 'withdrawn')),
  -- Only an agent's close gives one; a member's close leaves it NULL.
  withdrawn_reason text,
  -- On a member's answer: the message of the ask it answers.
  answers_message_id uuid REFERENCES inbox_messages (id),
  client_key text,
  created_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((ask_id IS NULL) = (ask_status IS NULL)),
  CHECK (ask_id IS NULL OR answers_message_id IS NULL),
  CHECK (withdrawn_reason IS NULL OR ask_status = 'withdrawn'),
  UNIQUE (item_id, client_key)
);
CREATE INDEX inbox_messages_thread ON inbox_messages (item_id, position DESC);
-- At most one open ask per item, and one answering message per ask.
CREATE UNIQUE INDEX inbox_messages_one_open_ask ON inbox_messages (item_id)
  WHERE ask_status = 'open';
CREATE UNIQUE INDEX inbox_messages_one_answer ON inbox_messages (answers_message_id)
  WHERE answers_message_id IS NOT NULL;

ALTER TABLE inbox_items
  ADD FOREIGN KEY (ask_message_id) REFERENCES inbox_messages (id);

-- Pictures are files of the message that carries them; they go with it.
CREATE TABLE inbox_files (
  id uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  item_id uuid NOT NULL REFERENCES inbox_items (id),
  message_id uuid NOT NULL REFERENCES inbox_messages (id) ON DELETE CASCADE,
  ordinal int NOT NULL,
  name text NOT NULL,
  content_type text NOT NULL
    CHECK (content_type IN ('image/png', 'image/jpeg', 'image/gif', 'image/webp')),
  size_bytes int NOT NULL,
  data bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (message_id, ordinal)
);
-- Images are compressed already: skip the attempt to compress them again.
ALTER TABLE inbox_files ALTER COLUMN data SET STORAGE EXTERNAL;

-- People an agent's owner lets see and answer its inbox, besides the owner.
CREATE TABLE inbox_grants (
  agent_id uuid NOT NULL REFERENCES accounts (id),
  account_id uuid NOT NULL REFERENCES accounts (id),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, account_id)
);
CREATE INDEX inbox_grants_account ON inbox_grants (account_id);

DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['inbox_items', 'inbox_messages', 'inbox_files', 'inbox_grants'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
  END LOOP;
END
$$;

ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (
  kind IN (
    'message_posted', 'message_updated', 'presence_changed', 'channel_changed',
    'inbox_item_changed'
  )
);
