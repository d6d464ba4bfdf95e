-- name: insert_app
-- Deliveries start from the log's head: nothing before the app was connected.
INSERT INTO webhook_endpoints (
  id, workspace_id, kind, url_sealed, url_shown, event_types, secret_sealed, event_cursor,
  slack_team_id, slack_email_match)
VALUES (
  %(id)s, compass_workspace(), 'slack_app', %(token_sealed)s, %(shown)s, %(event_types)s,
  %(secret_sealed)s,
  coalesce((SELECT last_event_id FROM event_counters WHERE workspace_id = compass_workspace()), 0),
  %(team_id)s, %(email_match)s)
ON CONFLICT (slack_team_id) WHERE kind = 'slack_app' DO NOTHING
RETURNING id

-- name: list_apps
SELECT e.id, e.slack_team_id, e.slack_email_match, e.enabled, e.disabled_reason, e.created_at,
       (compass_webhook_owing(e)).owed AS pending,
       (SELECT count(*) FROM webhook_deliveries d
        WHERE d.endpoint_id = e.id AND d.state = 'failed') AS failed,
       (SELECT a.error FROM webhook_deliveries d
        JOIN webhook_attempts a ON a.delivery_id = d.id AND a.n = d.attempts
        WHERE d.endpoint_id = e.id AND a.error <> ''
        ORDER BY a.started_at DESC LIMIT 1) AS last_error,
       coalesce((SELECT array_agg(c.channel_id::text || '=' || c.slack_channel
                                  ORDER BY c.created_at)
                 FROM slack_channels c WHERE c.endpoint_id = e.id), '{}') AS channels
FROM webhook_endpoints e
WHERE e.kind = 'slack_app' AND (%(id)s::uuid IS NULL OR e.id = %(id)s)
ORDER BY e.created_at, e.id

-- name: delete_app
DELETE FROM webhook_endpoints WHERE id = %(id)s AND kind = 'slack_app' RETURNING id

-- name: lock_app
SELECT id FROM webhook_endpoints WHERE id = %(id)s AND kind = 'slack_app' FOR UPDATE

-- name: count_channels
SELECT count(*) AS n FROM slack_channels WHERE endpoint_id = %(id)s

-- name: map_channel
INSERT INTO slack_channels (workspace_id, endpoint_id, channel_id, slack_channel)
SELECT compass_workspace(), %(id)s, c.id, %(slack_channel)s
FROM channels c WHERE c.id = %(channel_id)s AND c.kind = 'channel'
ON CONFLICT (endpoint_id, channel_id) DO UPDATE SET slack_channel = EXCLUDED.slack_channel
RETURNING channel_id

-- name: unmap_channel
DELETE FROM slack_channels WHERE endpoint_id = %(id)s AND channel_id = %(channel_id)s
RETURNING channel_id

-- name: target
SELECT slack_channel FROM slack_channels
WHERE endpoint_id = %(id)s AND channel_id = %(channel_id)s

-- name: get_message
SELECT slack_channel, ts, ended FROM slack_messages
WHERE endpoint_id = %(id)s AND ask_id = %(ask_id)s

-- name: post_waiting
-- The ask's post is still to be sent (or being sent) to this app.
SELECT EXISTS (
  SELECT 1 FROM webhook_deliveries
  WHERE endpoint_id = %(id)s AND dedupe_key = 'ask.posted:' || %(ask_id)s AND state = 'pending'
) AS waiting

-- name: insert_message
INSERT INTO slack_messages (workspace_id, endpoint_id, ask_id, slack_channel, ts)
VALUES (compass_workspace(), %(id)s, %(ask_id)s, %(slack_channel)s, %(ts)s)
ON CONFLICT (endpoint_id, ask_id) DO NOTHING

-- name: end_message
UPDATE slack_messages SET ended = true WHERE endpoint_id = %(id)s AND ask_id = %(ask_id)s

-- name: app_for_team
SELECT workspace_id, endpoint_id, token_sealed, secret_sealed, email_match, enabled
FROM compass_slack_app(%(team)s)

-- name: linked_account
SELECT a.id, a.handle FROM slack_people p JOIN accounts a ON a.id = p.account_id
WHERE p.team_id = %(team)s AND p.slack_user_id = %(user)s
  AND a.kind = 'human' AND a.deactivated_at IS NULL

-- name: account_by_email
SELECT id, handle FROM accounts
WHERE lower(email) = lower(%(email)s) AND kind = 'human' AND deactivated_at IS NULL

-- name: link_person
INSERT INTO slack_people (workspace_id, team_id, slack_user_id, account_id, how)
VALUES (compass_workspace(), %(team)s, %(user)s, %(account_id)s, %(how)s)
ON CONFLICT (workspace_id, team_id, slack_user_id)
DO UPDATE SET account_id = EXCLUDED.account_id, how = EXCLUDED.how, linked_at = now()

-- name: insert_code
INSERT INTO slack_link_codes (workspace_id, code_hash, team_id, slack_user_id, expires_at)
VALUES (compass_workspace(), %(code_hash)s, %(team)s, %(user)s, now() + %(lifetime)s)

-- name: take_code
DELETE FROM slack_link_codes WHERE code_hash = %(code_hash)s
RETURNING team_id, slack_user_id, expires_at > now() AS fresh

-- name: seen
INSERT INTO slack_interactions (workspace_id, key) VALUES (compass_workspace(), %(key)s)
ON CONFLICT (key) DO NOTHING RETURNING key

-- name: prune
WITH a AS (DELETE FROM slack_interactions WHERE seen_at < now() - %(age)s),
     b AS (DELETE FROM slack_link_codes WHERE expires_at < now())
SELECT 1

-- name: ending_of
SELECT kind, reason, handle FROM compass_slack_ending(%(workspace_id)s, %(ask_id)s)

-- name: answerers_of
SELECT handle FROM compass_slack_answerers(%(workspace_id)s, %(ask_id)s)

-- name: insert_direct
INSERT INTO slack_direct_messages (workspace_id, endpoint_id, ask_id, slack_channel, ts)
VALUES (compass_workspace(), %(id)s, %(ask_id)s, %(slack_channel)s, %(ts)s)
ON CONFLICT DO NOTHING

-- name: open_directs
SELECT slack_channel, ts FROM slack_direct_messages
WHERE endpoint_id = %(id)s AND ask_id = %(ask_id)s AND NOT ended
ORDER BY created_at, ts

-- name: end_direct
UPDATE slack_direct_messages SET ended = true
WHERE endpoint_id = %(id)s AND ask_id = %(ask_id)s AND slack_channel = %(slack_channel)s
  AND ts = %(ts)s

-- name: insert_person_code
INSERT INTO slack_person_codes (code_hash, workspace_id, account_id, expires_at)
VALUES (%(code_hash)s, compass_workspace(), %(account_id)s, now() + %(lifetime)s)

-- name: prune_person_codes
DELETE FROM slack_person_codes WHERE expires_at < now()

-- name: take_person_code
DELETE FROM slack_person_codes WHERE code_hash = %(code_hash)s
RETURNING account_id, expires_at > now() AS fresh

-- name: app_connected
SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE kind = 'slack_app') AS connected
