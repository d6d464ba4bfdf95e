-- Email: a webhook endpoint of kind 'email' mails the people an ask is for,
-- through the webhook deliveries (one per person per ask posted or ended), so
-- a mail is durable, retried and its attempts listed like any delivery. The
-- endpoint's sealed URL is the workspace's sender, a mailto: address; the
-- SMTP relay and its credentials are the servers' settings.
--
-- Each person says which asks they want mail about: 'named' (asks that name
-- them, the default), 'all' (those too, and asks in their channels that name
-- nobody) or 'off'.

ALTER TABLE webhook_endpoints DROP CONSTRAINT webhook_endpoints_kind_check;
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_kind_check
  CHECK (kind IN ('standard', 'slack', 'slack_app', 'email'));

CREATE TABLE notification_preferences (
  account_id uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  email text NOT NULL DEFAULT 'named' CHECK (email IN ('off', 'named', 'all')),
  updated_at timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE
);
CREATE INDEX notification_preferences_mail_all ON notification_preferences (workspace_id)
  WHERE email = 'all';

ALTER TABLE notification_preferences ENABLE ROW LEVEL SECURITY;

GRANT SELECT, INSERT, UPDATE ON notification_preferences TO compass_app, compass_maintenance;
-- Making an email endpoint's deliveries names the people of an ask's channel.
GRANT SELECT ON channel_members TO compass_maintenance;
