-- name: count_webhooks
SELECT count(*) AS n FROM webhook_endpoints

-- name: insert_webhook
-- Deliveries start from the log's head: nothing before the endpoint existed.
INSERT INTO webhook_endpoints (
  id, workspace_id, kind, url_sealed, url_shown, event_types, secret_sealed, event_cursor)
VALUES (
  %(id)s, compass_workspace(), %(kind)s, %(url_sealed)s, %(url_shown)s, %(event_types)s,
  %(secret_sealed)s,
  coalesce((SELECT last_event_id FROM event_counters WHERE workspace_id = compass_workspace()), 0))

-- name: get_webhook
SELECT e.id, e.workspace_id, e.kind, e.url_shown, e.event_types, e.enabled, e.disabled_reason,
       e.disabled_at, e.created_at,
       CASE WHEN e.previous_until > now() THEN e.previous_until END AS previous_until,
       -- Owed: deliveries still to send and those the log past its cursor makes.
       (compass_webhook_owing(e)).owed AS pending,
       (SELECT count(*) FROM webhook_deliveries d
        WHERE d.endpoint_id = e.id AND d.state = 'failed') AS failed
FROM webhook_endpoints e WHERE e.id = %(id)s

-- name: list_webhooks
SELECT e.id, e.workspace_id, e.kind, e.url_shown, e.event_types, e.enabled, e.disabled_reason,
       e.disabled_at, e.created_at,
       CASE WHEN e.previous_until > now() THEN e.previous_until END AS previous_until,
       -- Owed: deliveries still to send and those the log past its cursor makes.
       (compass_webhook_owing(e)).owed AS pending,
       (SELECT count(*) FROM webhook_deliveries d
        WHERE d.endpoint_id = e.id AND d.state = 'failed') AS failed
FROM webhook_endpoints e
WHERE (e.created_at, e.id) > (%(after_created)s, %(after_id)s)
ORDER BY e.created_at, e.id
LIMIT %(limit)s

-- name: lock_webhook
SELECT id, kind, enabled, secret_sealed FROM webhook_endpoints WHERE id = %(id)s FOR UPDATE

-- name: disable_webhook
UPDATE webhook_endpoints SET enabled = false, disabled_reason = %(reason)s, disabled_at = now()
WHERE id = %(id)s AND enabled

-- name: enable_webhook
-- It takes what happens from now on: events while it was off are not sent.
UPDATE webhook_endpoints SET enabled = true, disabled_reason = '', disabled_at = NULL,
  event_cursor = greatest(event_cursor, coalesce(
    (SELECT last_event_id FROM event_counters WHERE workspace_id = compass_workspace()), 0))
WHERE id = %(id)s AND NOT enabled

-- name: delete_webhook
DELETE FROM webhook_endpoints WHERE id = %(id)s RETURNING id

-- name: rotate_webhook_secret
UPDATE webhook_endpoints SET
  previous_secret_sealed = CASE WHEN %(grace)s > interval '0' THEN secret_sealed END,
  previous_until = CASE WHEN %(grace)s > interval '0' THEN now() + %(grace)s END,
  secret_sealed = %(secret_sealed)s
WHERE id = %(id)s

-- name: list_deliveries
SELECT d.id, d.endpoint_id, d.event_id, d.event_type, d.subject, d.state, d.attempts,
       d.next_attempt_at, d.created_at, d.finished_at, a.status_code, a.error
FROM webhook_deliveries d
LEFT JOIN webhook_attempts a ON a.delivery_id = d.id AND a.n = d.attempts
WHERE d.endpoint_id = %(endpoint_id)s
  AND (cardinality(%(states)s::text[]) = 0 OR d.state = ANY(%(states)s::text[]))
  AND (d.created_at, d.id) < (%(before_created)s, %(before_id)s)
ORDER BY d.created_at DESC, d.id DESC
LIMIT %(limit)s

-- name: get_delivery
SELECT d.id, d.endpoint_id, d.event_id, d.event_type, d.subject, d.state, d.attempts,
       d.next_attempt_at, d.created_at, d.finished_at, a.status_code, a.error, d.body
FROM webhook_deliveries d
LEFT JOIN webhook_attempts a ON a.delivery_id = d.id AND a.n = d.attempts
WHERE d.id = %(id)s

-- name: list_attempts
SELECT n, server_id, started_at, finished_at, status_code, latency_ms, error, response
FROM webhook_attempts WHERE delivery_id = %(delivery_id)s ORDER BY n

-- name: lock_delivery
-- An attempt is under way while its lease runs and it has no result yet.
SELECT d.id, d.state, e.enabled,
       (d.next_attempt_at > now() AND EXISTS (
          SELECT 1 FROM webhook_attempts a
          WHERE a.delivery_id = d.id AND a.n = d.attempts AND a.finished_at IS NULL)) AS sending
FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
WHERE d.id = %(id)s
FOR UPDATE OF d

-- name: redeliver
-- Due now, with its schedule from the start; its id (`webhook-id`) stays.
UPDATE webhook_deliveries SET state = 'pending', failures = 0, next_attempt_at = now(),
  finished_at = NULL
WHERE id = %(id)s

-- name: backlog
SELECT workspace_id, endpoint_id FROM compass_webhook_backlog(%(limit)s)

-- name: lock_for_fan_out
SELECT id, kind, event_types, event_cursor FROM webhook_endpoints
WHERE id = %(id)s AND enabled FOR UPDATE SKIP LOCKED

-- name: insert_deliveries
-- Arrays go in binary: in text form psycopg escapes every element, bodies
-- included, with a regular expression.
INSERT INTO webhook_deliveries (
  id, workspace_id, endpoint_id, event_id, event_type, subject, dedupe_key, body)
SELECT i, compass_workspace(), %(endpoint_id)s, e, t, s, k, b
FROM unnest(%(ids)b::uuid[], %(event_ids)b::bigint[], %(types)b::text[], %(subjects)b::text[],
            %(keys)b::text[], %(bodies)b::text[]) AS x (i, e, t, s, k, b)
ON CONFLICT (endpoint_id, dedupe_key) DO NOTHING

-- name: move_cursor
UPDATE webhook_endpoints SET event_cursor = %(cursor)s WHERE id = %(id)s

-- name: channel_names
SELECT id, name, kind FROM channels WHERE id = ANY(%(ids)b::uuid[])

-- name: handles
SELECT id, handle FROM accounts WHERE id = ANY(%(ids)b::uuid[])

-- name: inbox_items
SELECT i.id, i.key, i.title, m.blocks, m.ask_status, coalesce(m.withdrawn_reason, '') AS reason,
       m.ending
FROM inbox_items i LEFT JOIN inbox_messages m ON m.id = i.ask_message_id
WHERE i.id = ANY(%(ids)b::uuid[])

-- name: claim
SELECT delivery_id, workspace_id, endpoint_id, attempt, failures, event_type, body, kind,
       url_sealed, secret_sealed, previous_secret_sealed
FROM compass_claim_webhook_deliveries(
  %(server)s, %(lease)s, %(limit)s, %(per_endpoint)s, %(per_workspace)s, %(busy_ids)b::uuid[],
  %(busy_counts)b::integer[], %(busy_workspaces)b::uuid[], %(busy_workspace_counts)b::integer[],
  %(kinds)s::text[])

-- name: finish
SELECT compass_finish_webhook_attempts(
  %(deliveries)b::uuid[], %(attempts)b::integer[], %(delivered)b::boolean[],
  %(retry_in)b::interval[], %(status_codes)b::integer[], %(latencies)b::double precision[],
  %(errors)b::text[], %(responses)b::text[], %(disable)b::text[]) AS recorded

-- name: prune
SELECT compass_prune_webhook_deliveries(%(age)s, %(batch)s) AS n

-- name: channel_people
-- The active people of the channels an email endpoint's asks were posted in.
SELECT m.channel_id, m.account_id FROM channel_members m
JOIN accounts a ON a.id = m.account_id
WHERE m.channel_id = ANY(%(ids)b::uuid[]) AND a.kind = 'human' AND a.deactivated_at IS NULL
ORDER BY m.channel_id, m.joined_at, m.account_id

-- name: mail_people
-- Who of them can be mailed, and what they want mail about.
SELECT a.id, a.handle, a.email, coalesce(p.email, 'named') AS wants
FROM accounts a LEFT JOIN notification_preferences p ON p.account_id = a.id
WHERE a.id = ANY(%(ids)b::uuid[]) AND a.kind = 'human' AND a.deactivated_at IS NULL
  AND coalesce(a.email, '') <> ''

-- name: set_email_preference
INSERT INTO notification_preferences (account_id, workspace_id, email)
SELECT a.id, a.workspace_id, %(wants)s FROM accounts a WHERE a.id = %(account_id)s
ON CONFLICT (account_id) DO UPDATE SET email = excluded.email, updated_at = now()
RETURNING account_id
