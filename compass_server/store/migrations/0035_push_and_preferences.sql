-- Push to phones and closed tabs, and each person's surfaces and quiet hours.
--
-- A webhook endpoint of kind 'push' sends Web Push messages to the browsers
-- the people an ask is for subscribed (its URL is the VAPID subject, a
-- mailto: address), through the webhook deliveries like mail. The VAPID key
-- pair is made once for the deployment and kept sealed with the webhook key.
--
-- A person's page and push surfaces and quiet hours: NULL takes the
-- server's default (a setting).

ALTER TABLE webhook_endpoints DROP CONSTRAINT webhook_endpoints_kind_check;
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_kind_check
  CHECK (kind IN ('standard', 'slack', 'slack_app', 'email', 'push'));

ALTER TABLE notification_preferences
  ADD COLUMN page boolean,
  ADD COLUMN push boolean,
  -- Minutes after midnight in time_zone; quiet from start until end (which
  -- may be the next day). Both or neither.
  ADD COLUMN quiet_start smallint CHECK (quiet_start BETWEEN 0 AND 1439),
  ADD COLUMN quiet_end smallint CHECK (quiet_end BETWEEN 0 AND 1439),
  ADD COLUMN time_zone text CHECK (length(time_zone) <= 64),
  ADD CONSTRAINT notification_preferences_quiet_shape
    CHECK ((quiet_start IS NULL) = (quiet_end IS NULL));

CREATE TABLE push_subscriptions (
  id uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  account_id uuid NOT NULL,
  endpoint text NOT NULL CHECK (length(endpoint) <= 2048),
  p256dh text NOT NULL CHECK (length(p256dh) <= 128),
  auth text NOT NULL CHECK (length(auth) <= 64),
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (account_id, endpoint),
  FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE
);
CREATE INDEX push_subscriptions_workspace ON push_subscriptions (workspace_id, account_id);

ALTER TABLE push_subscriptions ENABLE ROW LEVEL SECURITY;

GRANT SELECT, INSERT, UPDATE, DELETE ON push_subscriptions TO compass_app, compass_maintenance;

-- One row: the deployment's VAPID key pair, the private key sealed.
CREATE TABLE push_vapid_key (
  id uuid PRIMARY KEY,
  one boolean NOT NULL DEFAULT true UNIQUE CHECK (one),
  private_sealed bytea NOT NULL,
  public_key text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT ON push_vapid_key TO compass_maintenance;
