-- Where agents already ask: a harness's hooks (Claude Code's, Codex's) post
-- asks with a token of their own that does nothing else.
--
-- A hook token is a credential of a fourth kind: it speaks for one agent,
-- posts its hooks' asks in one channel, under one policy (who may answer
-- what, and how many must), and signs in nowhere else (the server refuses
-- it on every other route). Revoking it, its expiry and its notification
-- to every server hold it as they hold tokens.

ALTER TABLE credentials DROP CONSTRAINT credentials_kind_check;
ALTER TABLE credentials ADD CONSTRAINT credentials_kind_check
  CHECK (kind IN ('token', 'session', 'link', 'hook'));
ALTER TABLE credentials ADD CONSTRAINT credentials_hook_shape
  CHECK (kind <> 'hook' OR (account_id IS NOT NULL AND runner_id IS NULL));

-- One row per hook token: where its asks go and the policy they follow
-- (as checked and resolved when it was made: people by account id).
CREATE TABLE hook_tokens (
  credential_id uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  channel_id uuid NOT NULL,
  policy jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (workspace_id, credential_id) REFERENCES credentials (workspace_id, id),
  FOREIGN KEY (workspace_id, channel_id) REFERENCES channels (workspace_id, id)
);
CREATE INDEX hook_tokens_channel ON hook_tokens (channel_id);
ALTER TABLE hook_tokens ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON hook_tokens FROM compass_app;
GRANT SELECT ON hook_tokens TO compass_app, compass_maintenance;

-- How many held hook requests (on any server) wait on an ask: the one whose
-- count falls to none withdraws it, so a retry of the same request, held
-- beside the first, keeps the ask open when the first hangs up.
CREATE TABLE hook_holds (
  ask_id text PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  holders int NOT NULL CHECK (holders >= 0),
  updated_at timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (workspace_id, ask_id) REFERENCES asks (workspace_id, ask_id)
);
ALTER TABLE hook_holds ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON hook_holds FROM compass_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON hook_holds TO compass_app;
