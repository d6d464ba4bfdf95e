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

ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (
  kind IN (
    'message_posted', 'message_updated', 'presence_changed', 'channel_changed',
    'inbox_item_changed', 'agent_moved'
  )
);

-- The writes, gated by participation.
