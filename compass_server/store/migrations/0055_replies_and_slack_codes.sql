-- Answers where the notice lands: a reply to an ask's mail, and Slack for
-- people who sign in with a token alone.
--
-- A mail about an ask carries a reply address of its own person and ask
-- (ask+TOKEN@reply-domain); the token is the server key's MAC of (ask,
-- person), kept here as its digest, so a reply finds whom and what it
-- answers, and an address nobody was sent finds nothing.
CREATE TABLE mail_reply_addresses (
  token_hash bytea PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  ask_id text NOT NULL,
  account_id uuid NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (workspace_id, account_id) REFERENCES accounts (workspace_id, id) ON DELETE CASCADE
);
ALTER TABLE mail_reply_addresses ENABLE ROW LEVEL SECURITY;
-- The mailer writes them; a reply reads one through compass_mail_reply.
REVOKE ALL ON mail_reply_addresses FROM compass_app;
GRANT SELECT, INSERT ON mail_reply_addresses TO compass_maintenance;

-- A one-time code a signed-in person asks the page for and types into
-- Slack (`/compass link CODE`): it links the Slack user who types it to the
-- person, once, before it expires. Only its digest is kept.
CREATE TABLE slack_person_codes (
  code_hash bytea PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  account_id uuid NOT NULL,
  expires_at timestamptz NOT NULL,
  FOREIGN KEY (workspace_id, account_id) REFERENCES accounts (workspace_id, id) ON DELETE CASCADE
);
CREATE INDEX slack_person_codes_expiry ON slack_person_codes (expires_at);
ALTER TABLE slack_person_codes ENABLE ROW LEVEL SECURITY;
GRANT SELECT, INSERT, DELETE ON slack_person_codes TO compass_app, compass_maintenance;

ALTER TABLE ask_history DROP CONSTRAINT ask_history_surface_check;
ALTER TABLE ask_history ADD CONSTRAINT ask_history_surface_check CHECK (surface IN (
  'grpc', 'connect', 'relay', 'web', 'inbox', 'server', 'standing_answer', 'slack', 'email'));

-- A Slack user linked by a person's code typed in Slack.
ALTER TABLE slack_people DROP CONSTRAINT slack_people_how_check;
ALTER TABLE slack_people ADD CONSTRAINT slack_people_how_check
  CHECK (how IN ('link', 'email', 'code'));
