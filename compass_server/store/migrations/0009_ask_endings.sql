-- Every ending of an ask is typed and recorded. An ask ends exactly once:
-- answered, withdrawn by its agent, withdrawn by the agent's owner, declined,
-- or expired at its deadline. Each ending is written by one path
-- (compass_write_ending) under the ask message's row lock, so exactly one
-- wins a race; the losers read the winner's ending on the locked row.
--
-- The ask's JSON gains `ending` {kind, actor_id, actor_handle, at, surface,
-- reason}; the flags older clients read stay meaningful: `answered` only for
-- an answer, `cancelled` for either withdraw, and an expiry marks every
-- question `timed_out`. Asks that ended before this migration keep their
-- flags and no `ending`; readers derive the kind from the flags.

-- When an open ask expires; NULL without a deadline and once it has ended,
-- so the sweep's index holds only asks that can still expire.
ALTER TABLE asks ADD COLUMN due_at timestamptz;
CREATE INDEX asks_due ON asks (due_at) WHERE due_at IS NOT NULL;

-- Who did what to an ask, when, and through which surface; written in the
-- transaction of the change. Refused attempts write nothing.
CREATE TABLE ask_history (
  id bigserial PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  ask_id text NOT NULL REFERENCES asks (ask_id),
  kind text NOT NULL CHECK (kind IN (
    'posted', 'answered', 'withdrawn_by_agent', 'withdrawn_by_owner', 'declined', 'expired')),
  -- NULL for the server (an expiry).
  actor_id uuid REFERENCES accounts (id),
  -- NULL for changes made before surfaces were recorded.
  surface text CHECK (surface IN ('grpc', 'connect', 'relay', 'web', 'inbox', 'server')),
  reason text NOT NULL DEFAULT '',
  at timestamptz NOT NULL DEFAULT now(),
  CHECK ((kind = 'expired') = (actor_id IS NULL))
);
CREATE INDEX ask_history_ask ON ask_history (ask_id, id);
-- An ask is posted once and ends once, whatever races.
CREATE UNIQUE INDEX ask_history_one_post ON ask_history (ask_id) WHERE kind = 'posted';
CREATE UNIQUE INDEX ask_history_one_ending ON ask_history (ask_id) WHERE kind <> 'posted';
ALTER TABLE ask_history ENABLE ROW LEVEL SECURITY;

GRANT SELECT, INSERT ON ask_history TO compass_app;
GRANT USAGE ON SEQUENCE ask_history_id_seq TO compass_app;

-- The record of asks posted and answered before this migration; a withdraw
-- from then has no time on record, so it has no entry.
INSERT INTO ask_history (workspace_id, ask_id, kind, actor_id, at)
  SELECT a.workspace_id, a.ask_id, 'posted', m.author_id, m.created_at
  FROM asks a JOIN messages m ON m.id = a.message_id;
INSERT INTO ask_history (workspace_id, ask_id, kind, actor_id, at)
  SELECT m.workspace_id, b.block -> 'ask_answer' ->> 'ask_id', 'answered', m.author_id, m.created_at
  FROM messages m, jsonb_array_elements(m.blocks) AS b(block)
  WHERE b.block ->> 'kind' = 'ask_answer';
