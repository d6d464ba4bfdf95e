-- A Slack direct message as a surface. A person linked to a Slack user of
-- their workspace's connected app (slack_people, 0030) may turn it on: the
-- app's deliveries then include, for each ask posted for them (and each
-- reminder or escalation that reaches them), a direct message from the app
-- with the ask's buttons, made from the event log, retried and held through
-- quiet hours like push. NULL takes the server's default (a setting).

ALTER TABLE notification_preferences ADD COLUMN slack_dm boolean;
