-- name: get_preferences
SELECT email, page, push, quiet_start, quiet_end, time_zone, slack_dm
FROM notification_preferences WHERE account_id = %(account_id)s

-- name: set_preferences
INSERT INTO notification_preferences
  (account_id, workspace_id, email, page, push, quiet_start, quiet_end, time_zone, slack_dm)
SELECT a.id, a.workspace_id, %(email)s, %(page)s, %(push)s, %(quiet_start)s, %(quiet_end)s,
       %(time_zone)s, %(slack_dm)s
FROM accounts a WHERE a.id = %(account_id)s
ON CONFLICT (account_id) DO UPDATE SET
  email = excluded.email, page = excluded.page, push = excluded.push,
  quiet_start = excluded.quiet_start, quiet_end = excluded.quiet_end,
  time_zone = excluded.time_zone, slack_dm = excluded.slack_dm, updated_at = now()
RETURNING account_id

-- name: count_subscriptions
-- Two browsers subscribing at once count one after the other.
SELECT pg_advisory_xact_lock(hashtextextended('push:' || %(account_id)s::text, 0)),
       (SELECT count(*) FROM push_subscriptions
        WHERE account_id = %(account_id)s AND endpoint <> %(endpoint)s) AS n

-- name: add_subscription
INSERT INTO push_subscriptions (id, workspace_id, account_id, endpoint, p256dh, auth)
VALUES (%(id)s, %(workspace_id)s, %(account_id)s, %(endpoint)s, %(p256dh)s, %(auth)s)
ON CONFLICT (account_id, endpoint) DO UPDATE SET p256dh = excluded.p256dh, auth = excluded.auth
RETURNING id, endpoint, created_at

-- name: remove_subscription
DELETE FROM push_subscriptions WHERE account_id = %(account_id)s AND endpoint = %(endpoint)s
RETURNING id

-- name: subscription
SELECT id, account_id, endpoint, p256dh, auth FROM push_subscriptions WHERE id = %(id)s

-- name: drop_subscription
DELETE FROM push_subscriptions WHERE id = %(id)s

-- name: subscriptions_of
-- The push subscriptions of the people an endpoint's asks are for.
SELECT s.id, s.account_id FROM push_subscriptions s
WHERE s.account_id = ANY(%(ids)b::uuid[])
ORDER BY s.account_id, s.created_at, s.id

-- name: push_people
SELECT a.id, a.handle, p.push FROM accounts a
LEFT JOIN notification_preferences p ON p.account_id = a.id
WHERE a.id = ANY(%(ids)b::uuid[]) AND a.kind = 'human' AND a.deactivated_at IS NULL

-- name: vapid_key
SELECT id, private_sealed, public_key FROM push_vapid_key

-- name: make_vapid_key
INSERT INTO push_vapid_key (id, private_sealed, public_key) VALUES (%(id)s, %(sealed)s, %(public)s)
ON CONFLICT (one) DO NOTHING

-- name: slack_dm_available
-- Whether the person is linked to a Slack user of their workspace's app.
SELECT EXISTS (
  SELECT 1 FROM slack_people sp
  JOIN webhook_endpoints e
    ON e.workspace_id = sp.workspace_id AND e.kind = 'slack_app' AND e.slack_team_id = sp.team_id
  WHERE sp.account_id = %(account_id)s
) AS available

-- name: slack_dm_people
-- The people a Slack app's direct messages may go to: each linked to a
-- Slack user of the app's team, and their choice (NULL: the default).
SELECT a.id, sp.slack_user_id, p.slack_dm FROM accounts a
JOIN slack_people sp ON sp.account_id = a.id
  AND sp.team_id = (SELECT slack_team_id FROM webhook_endpoints WHERE id = %(endpoint_id)s)
LEFT JOIN notification_preferences p ON p.account_id = a.id
WHERE a.id = ANY(%(ids)b::uuid[]) AND a.kind = 'human' AND a.deactivated_at IS NULL
