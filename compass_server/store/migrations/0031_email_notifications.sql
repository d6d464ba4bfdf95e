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
CREATE POLICY workspace_only ON notification_preferences TO compass_app, compass_maintenance
  USING (workspace_id = (SELECT compass_workspace()))
  WITH CHECK (workspace_id = (SELECT compass_workspace()));
GRANT SELECT, INSERT, UPDATE ON notification_preferences TO compass_app, compass_maintenance;
-- Making an email endpoint's deliveries names the people of an ask's channel.
GRANT SELECT ON channel_members TO compass_maintenance;

-- Claims as 0016's, of endpoints of the given kinds only: a server with no
-- mail relay leaves email deliveries to those with one, rather than spending
-- their retries.
CREATE FUNCTION compass_claim_webhook_deliveries(
  server uuid, lease interval, max_rows integer, per_endpoint integer,
  busy_ids uuid[], busy_counts integer[], kinds text[]
)
RETURNS TABLE (
  delivery_id uuid, workspace_id uuid, endpoint_id uuid, attempt integer, failures integer,
  event_type text, body text, kind text, url_sealed bytea, secret_sealed bytea,
  previous_secret_sealed bytea
)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
  RETURN QUERY
  WITH room AS (
    SELECT e.id, greatest(0, per_endpoint - coalesce(b.n, 0)) AS n
    FROM webhook_endpoints e
    LEFT JOIN unnest(busy_ids, busy_counts) AS b (id, n) ON b.id = e.id
    WHERE e.enabled AND e.kind = ANY(kinds)
    ORDER BY random()
  ), picked AS (
    SELECT d.id FROM room
    CROSS JOIN LATERAL (
      SELECT d.id FROM webhook_deliveries d
      WHERE d.endpoint_id = room.id AND d.state = 'pending' AND d.next_attempt_at <= now()
      ORDER BY d.next_attempt_at
      LIMIT room.n
      FOR UPDATE SKIP LOCKED
    ) d
    LIMIT max_rows
  ), claimed AS (
    UPDATE webhook_deliveries d
    SET attempts = d.attempts + 1, next_attempt_at = now() + lease
    FROM picked WHERE d.id = picked.id
    RETURNING d.*
  ), cut AS (
    UPDATE webhook_attempts a
    SET finished_at = now(), error = 'the server sending it stopped before it finished'
    FROM claimed c WHERE a.delivery_id = c.id AND a.finished_at IS NULL
  ), started AS (
    INSERT INTO webhook_attempts (workspace_id, delivery_id, n, server_id)
    SELECT c.workspace_id, c.id, c.attempts, server FROM claimed c
  )
  SELECT c.id, c.workspace_id, c.endpoint_id, c.attempts, c.failures, c.event_type, c.body,
         e.kind, e.url_sealed, e.secret_sealed,
         CASE WHEN e.previous_until > now() THEN e.previous_secret_sealed END
  FROM claimed c JOIN webhook_endpoints e ON e.id = c.endpoint_id;
END
$$;
REVOKE ALL ON FUNCTION
  compass_claim_webhook_deliveries(uuid, interval, integer, integer, uuid[], integer[], text[])
  FROM PUBLIC, compass_app;
GRANT EXECUTE ON FUNCTION
  compass_claim_webhook_deliveries(uuid, interval, integer, integer, uuid[], integer[], text[])
  TO compass_maintenance;
