-- Asks that need several people, and standing answers.
--
-- 1. A quorum ask names its answerers and needs K of them (`quorum` in the
-- ask's JSON, client-owned and immutable like the rest of its content).
-- Each named person's part is a vote, appended to the ask's server-owned
-- `quorum_votes` under the message's row lock, with a history entry
-- ('quorum_answer' or 'quorum_decline') in the same transaction: the ask's
-- JSON is what every reader and every event already carries, so a vote is
-- visible to the others wherever the ask shows, and the history's unique
-- index on (ask, person) makes a vote final for its person whatever code
-- writes it. The K-th answer is the ending: it writes its own vote and the
-- ending together, and posts the one ask_answer message carrying all K
-- answers. A decline ends the ask (its vote kept), unless the ask says
-- declines count against the quorum: then it is a vote, and the ask ends
-- declined only when K answers can no longer be reached. Withdraws and
-- expiry end a quorum ask as any other, its votes kept. Every vote, like
-- every ending, holds the row at or before the deadline (0021).
--
-- 2. A standing answer is a person's rule, made with an answer: later asks
-- of that agent (or of the agents below it) whose every question is one of
-- the rule's (the same text, header, options and multiplicity) are
-- answered at their post, in the post's transaction, for that person,
-- attributed to the rule (surface 'standing_answer'). An ask that names its
-- answerers takes only their rules; a quorum ask counts a rule as its
-- person's vote. The post locks each rule it uses (FOR SHARE) and checks it
-- again under the lock, by the clock then, and a revoke updates the rule's
-- row: a revoke waits for a post that took the rule, and a post for a
-- revoke under way, which it then sees. So once a revoke commits, or a rule
-- expires, it answers nothing.

-- --- the record -------------------------------------------------------------------

CREATE TABLE standing_answers (
  id uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  -- The person it answers for.
  account_id uuid NOT NULL,
  -- The agent whose asks it answers, and with include_subagents the agents below it.
  agent_id uuid NOT NULL,
  include_subagents boolean NOT NULL DEFAULT false,
  -- The answered questions of the ask it was made with, as stored there.
  questions jsonb NOT NULL,
  made_from_ask_id text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz,
  UNIQUE (workspace_id, id),
  FOREIGN KEY (workspace_id, account_id) REFERENCES accounts (workspace_id, id),
  FOREIGN KEY (workspace_id, agent_id) REFERENCES accounts (workspace_id, id),
  FOREIGN KEY (workspace_id, made_from_ask_id) REFERENCES asks (workspace_id, ask_id),
  CHECK (expires_at > created_at)
);
CREATE INDEX standing_answers_agent ON standing_answers (agent_id) WHERE revoked_at IS NULL;
CREATE INDEX standing_answers_account ON standing_answers (account_id, created_at DESC);
CREATE INDEX standing_answers_workspace ON standing_answers (workspace_id, created_at DESC);
ALTER TABLE standing_answers ENABLE ROW LEVEL SECURITY;

REVOKE ALL ON standing_answers FROM compass_app;
GRANT SELECT, UPDATE (revoked_at) ON standing_answers TO compass_app;
GRANT SELECT ON standing_answers TO compass_maintenance;
-- UPDATE on a column is what a row lock (FOR SHARE) asks for.
GRANT SELECT, INSERT, UPDATE (revoked_at) ON standing_answers TO compass_writer;

ALTER TABLE ask_history DROP CONSTRAINT ask_history_kind_check;
ALTER TABLE ask_history ADD CONSTRAINT ask_history_kind_check CHECK (kind IN (
  'posted', 'answered', 'withdrawn_by_agent', 'withdrawn_by_owner', 'declined', 'expired',
  'quorum_answer', 'quorum_decline'));
ALTER TABLE ask_history DROP CONSTRAINT ask_history_surface_check;
ALTER TABLE ask_history ADD CONSTRAINT ask_history_surface_check CHECK (surface IN (
  'grpc', 'connect', 'relay', 'web', 'inbox', 'server', 'standing_answer'));
ALTER TABLE ask_history
  ADD COLUMN standing_answer_id uuid,
  ADD CONSTRAINT ask_history_standing_answer_id_fkey
    FOREIGN KEY (workspace_id, standing_answer_id) REFERENCES standing_answers (workspace_id, id),
  ADD CONSTRAINT ask_history_standing_surface
    CHECK ((standing_answer_id IS NULL) = (surface IS DISTINCT FROM 'standing_answer'));
-- An ask still ends once; a person votes once.
DROP INDEX ask_history_one_ending;
CREATE UNIQUE INDEX ask_history_one_ending ON ask_history (ask_id)
  WHERE kind NOT IN ('posted', 'quorum_answer', 'quorum_decline');
CREATE UNIQUE INDEX ask_history_one_vote ON ask_history (ask_id, actor_id)
  WHERE kind IN ('quorum_answer', 'quorum_decline');
CREATE INDEX ask_history_standing ON ask_history (standing_answer_id)
  WHERE standing_answer_id IS NOT NULL;

-- --- votes --------------------------------------------------------------------------

-- --- standing answers ---------------------------------------------------------------

-- --- the answer and the other endings -----------------------------------------------

-- --- what a message may change ------------------------------------------------------

-- --- what webhook endpoints are owed ------------------------------------------------
