-- A Slack app: asks posted as interactive messages, answered in Slack, and
-- updated in place when they end.
--
-- A connected app is a webhook endpoint of kind 'slack_app': its deliveries
-- (an ask posted, an ask ended) are made from the event log and retried by
-- the courier like any webhook's, so the write path is untouched and an
-- ending's update is never lost; the sealed "URL" is the bot token and the
-- sealed secret is the app's signing secret. What is Slack's own lives
-- beside it: the channels mapped, the message each ask was posted as, the
-- Slack users linked to accounts, and the interactions already handled.

ALTER TABLE webhook_endpoints DROP CONSTRAINT webhook_endpoints_kind_check;
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_kind_check
  CHECK (kind IN ('standard', 'slack', 'slack_app'));
ALTER TABLE webhook_endpoints ADD COLUMN slack_team_id text;
-- The operator allows linking a Slack user by a verified email that matches.
ALTER TABLE webhook_endpoints ADD COLUMN slack_email_match boolean NOT NULL DEFAULT false;
-- One app per Slack workspace across every Compass workspace: an interaction
-- names its team, and that finds one app.
CREATE UNIQUE INDEX webhook_endpoints_slack_team ON webhook_endpoints (slack_team_id)
  WHERE kind = 'slack_app';

ALTER TABLE ask_history DROP CONSTRAINT ask_history_surface_check;
ALTER TABLE ask_history ADD CONSTRAINT ask_history_surface_check CHECK (surface IN (
  'grpc', 'connect', 'relay', 'web', 'inbox', 'server', 'standing_answer', 'slack'));

CREATE TABLE slack_channels (
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  endpoint_id uuid NOT NULL,
  channel_id uuid NOT NULL,
  slack_channel text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (endpoint_id, channel_id),
  FOREIGN KEY (workspace_id, endpoint_id) REFERENCES webhook_endpoints (workspace_id, id)
    ON DELETE CASCADE
);

-- The Slack message an ask was posted as; `ended` once it shows the ending.
CREATE TABLE slack_messages (
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  endpoint_id uuid NOT NULL,
  ask_id text NOT NULL,
  slack_channel text NOT NULL,
  ts text NOT NULL,
  ended boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (endpoint_id, ask_id),
  FOREIGN KEY (workspace_id, endpoint_id) REFERENCES webhook_endpoints (workspace_id, id)
    ON DELETE CASCADE
);

CREATE TABLE slack_people (
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  team_id text NOT NULL,
  slack_user_id text NOT NULL,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  -- 'link' (signed in through a link) or 'email' (a verified email matched).
  how text NOT NULL CHECK (how IN ('link', 'email')),
  linked_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, team_id, slack_user_id)
);

-- A link that connects a Slack user to the account that opens it signed in;
-- stored as its digest, used once.
CREATE TABLE slack_link_codes (
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  code_hash bytea PRIMARY KEY,
  team_id text NOT NULL,
  slack_user_id text NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX slack_link_codes_expiry ON slack_link_codes (expires_at);

-- Interactions handled: Slack's retries and a double click are seen once.
CREATE TABLE slack_interactions (
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  key text PRIMARY KEY,
  seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX slack_interactions_age ON slack_interactions (seen_at);

DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['slack_channels', 'slack_messages', 'slack_people',
                           'slack_link_codes', 'slack_interactions'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO compass_app, compass_maintenance', t);
  END LOOP;
END
$$;
