-- A Slack direct message as a surface. A person linked to a Slack user of
-- their workspace's connected app (slack_people, 0030) may turn it on: the
-- app's deliveries then include, for each ask posted for them (and each
-- reminder or escalation that reaches them), a direct message from the app
-- with the ask's buttons, made from the event log, retried and held through
-- quiet hours like push. NULL takes the server's default (a setting).

ALTER TABLE notification_preferences ADD COLUMN slack_dm boolean;

-- The direct messages an ask was sent as (one per person and step), so the
-- ask's ending edits each in place like its channel message; `ended` once
-- it shows the ending.
CREATE TABLE slack_direct_messages (
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  endpoint_id uuid NOT NULL,
  ask_id text NOT NULL,
  slack_channel text NOT NULL,
  ts text NOT NULL,
  ended boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (endpoint_id, ask_id, slack_channel, ts),
  FOREIGN KEY (workspace_id, endpoint_id) REFERENCES webhook_endpoints (workspace_id, id)
    ON DELETE CASCADE
);
ALTER TABLE slack_direct_messages ENABLE ROW LEVEL SECURITY;

GRANT SELECT, INSERT, UPDATE, DELETE ON slack_direct_messages TO compass_app, compass_maintenance;
