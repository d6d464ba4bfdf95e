-- Webhooks: a workspace's endpoints, the deliveries made for them and every
-- attempt to send one.
--
-- Deliveries are derived from the event log, which is already written in the
-- transaction of every change: each endpoint keeps a cursor into its
-- workspace's log, and whichever server is free turns the events after it
-- into delivery rows and moves the cursor, in one transaction holding the
-- endpoint's row (SKIP LOCKED, so servers never meet). The write path is
-- untouched. A delivery is claimed with a lease (its next attempt moved past
-- the attempt's timeout), so a server that dies mid-send leaves it to be sent
-- again with the same id once the lease ends, and two servers never send it at
-- once.
--
-- An endpoint's URL and signing secrets are sealed by the server with the
-- operator's key (AES-GCM, bound to the endpoint's id): a dump of the
-- database alone shows neither.

CREATE TABLE webhook_endpoints (
  id uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  kind text NOT NULL CHECK (kind IN ('standard', 'slack')),
  url_sealed bytea NOT NULL,
  -- The URL as lists show it: scheme, host, port, and no more of the path
  -- than its first segment.
  url_shown text NOT NULL,
  -- The event types it takes; empty: every type.
  event_types text[] NOT NULL DEFAULT '{}',
  secret_sealed bytea NOT NULL,
  -- After a rotation the old secret signs too, until previous_until.
  previous_secret_sealed bytea,
  previous_until timestamptz,
  enabled boolean NOT NULL DEFAULT true,
  disabled_reason text NOT NULL DEFAULT '',
  disabled_at timestamptz,
  -- The last event of the workspace's log turned into deliveries.
  event_cursor bigint NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, id),
  CHECK ((previous_secret_sealed IS NULL) = (previous_until IS NULL))
);
CREATE INDEX webhook_endpoints_workspace ON webhook_endpoints (workspace_id, created_at, id);

CREATE TABLE webhook_deliveries (
  -- Its `webhook-id`, the same on every attempt.
  id uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  endpoint_id uuid NOT NULL,
  -- The event it was made from: the workspace's sequence number.
  event_id bigint NOT NULL,
  event_type text NOT NULL,
  -- The ask or inbox item it is about.
  subject text NOT NULL,
  -- One delivery per endpoint per key: an ask is posted once and ends once.
  dedupe_key text NOT NULL,
  -- The body as sent, byte for byte on every attempt.
  body text NOT NULL,
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
  -- Attempts claimed so far; the next one is attempts + 1.
  attempts integer NOT NULL DEFAULT 0,
  -- Failures since it was made (or redelivered): the place in the retry schedule.
  failures integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  created_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  UNIQUE (workspace_id, id),
  UNIQUE (endpoint_id, dedupe_key),
  FOREIGN KEY (workspace_id, endpoint_id) REFERENCES webhook_endpoints (workspace_id, id)
    ON DELETE CASCADE
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (endpoint_id, next_attempt_at)
  WHERE state = 'pending';
CREATE INDEX webhook_deliveries_listing ON webhook_deliveries (endpoint_id, created_at DESC, id);
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (finished_at)
  WHERE finished_at IS NOT NULL;

CREATE TABLE webhook_attempts (
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  delivery_id uuid NOT NULL,
  n integer NOT NULL,
  -- The server process that made it.
  server_id uuid NOT NULL,
  started_at timestamptz NOT NULL DEFAULT now(),
  -- NULL while under way.
  finished_at timestamptz,
  -- The receiver's HTTP status; NULL when no response came.
  status_code integer,
  latency_ms double precision,
  -- Why it failed, in the server's words; empty when delivered.
  error text NOT NULL DEFAULT '',
  -- The start of the receiver's response body.
  response text NOT NULL DEFAULT '',
  PRIMARY KEY (delivery_id, n),
  FOREIGN KEY (workspace_id, delivery_id) REFERENCES webhook_deliveries (workspace_id, id)
    ON DELETE CASCADE
);

DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['webhook_endpoints', 'webhook_deliveries', 'webhook_attempts'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format(
      'CREATE POLICY workspace_only ON %I TO compass_app, compass_maintenance '
      'USING (workspace_id = (SELECT compass_workspace())) '
      'WITH CHECK (workspace_id = (SELECT compass_workspace()))', t);
  END LOOP;
END
$$;

-- An admin's calls and the operator's commands manage their workspace's
-- endpoints and read (and redeliver) its deliveries; both are held to that
-- workspace by the policies above.
GRANT SELECT, INSERT, UPDATE, DELETE ON webhook_endpoints TO compass_app, compass_maintenance;
GRANT SELECT, UPDATE ON webhook_deliveries TO compass_app, compass_maintenance;
GRANT SELECT ON webhook_attempts TO compass_app, compass_maintenance;
-- Making deliveries reads the log, and names channels, accounts and inbox items.
GRANT INSERT ON webhook_deliveries TO compass_maintenance;
GRANT SELECT ON channels, inbox_messages TO compass_maintenance;

-- Endpoints whose cursor is behind their workspace's log, for the servers to
-- make deliveries from; at most max_rows, oldest cursor first.
CREATE FUNCTION compass_webhook_backlog(max_rows integer)
RETURNS TABLE (workspace_id uuid, endpoint_id uuid)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT e.workspace_id, e.id FROM webhook_endpoints e
  JOIN event_counters c ON c.workspace_id = e.workspace_id
  WHERE e.enabled AND e.event_cursor < c.last_event_id
  ORDER BY e.event_cursor - c.last_event_id
  LIMIT max_rows
$$;

-- Claims due deliveries for one server: at most max_rows, and per endpoint no
-- more than its room (per_endpoint less what this server has in flight
-- there), endpoints in random order so a busy one can't starve the rest.
-- Each claim is an attempt: numbered, recorded as started, and leased (its
-- next attempt moves `lease` ahead), so no other server sends it meanwhile.
-- An earlier attempt still open was cut short by its server's end.
CREATE FUNCTION compass_claim_webhook_deliveries(
  server uuid, lease interval, max_rows integer, per_endpoint integer,
  busy_ids uuid[], busy_counts integer[]
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
    WHERE e.enabled
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

-- Records how attempts went, each if it is still its delivery's latest: the
-- attempt's row, and the delivery delivered, due again after retry_in, or
-- failed (retry_in NULL). `disable` (a 410 Gone) turns its endpoint off.
-- Returns how many were recorded.
CREATE FUNCTION compass_finish_webhook_attempts(
  deliveries uuid[], attempts integer[], delivered boolean[], retry_in interval[],
  codes integer[], took_ms double precision[], why text[], said text[], disable text[]
) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  d webhook_deliveries%ROWTYPE;
  recorded integer := 0;
BEGIN
  FOR i IN 1 .. coalesce(array_length(deliveries, 1), 0) LOOP
    UPDATE webhook_deliveries SET
      state = CASE WHEN delivered[i] THEN 'delivered' WHEN retry_in[i] IS NULL THEN 'failed'
                   ELSE 'pending' END,
      failures = failures + CASE WHEN delivered[i] THEN 0 ELSE 1 END,
      next_attempt_at = coalesce(now() + retry_in[i], next_attempt_at),
      finished_at = CASE WHEN delivered[i] OR retry_in[i] IS NULL THEN now() END
    WHERE id = deliveries[i] AND webhook_deliveries.attempts = $2[i] AND state = 'pending'
    RETURNING * INTO d;
    CONTINUE WHEN NOT FOUND;
    recorded := recorded + 1;
    UPDATE webhook_attempts a SET finished_at = now(), status_code = codes[i],
      latency_ms = took_ms[i], error = why[i], response = said[i]
    WHERE a.delivery_id = deliveries[i] AND a.n = $2[i];
    IF disable[i] IS NOT NULL THEN
      UPDATE webhook_endpoints SET enabled = false, disabled_reason = disable[i],
        disabled_at = now()
      WHERE id = d.endpoint_id AND enabled;
    END IF;
  END LOOP;
  RETURN recorded;
END
$$;

-- Finished deliveries older than `age` go, a batch at a time; returns how many.
CREATE FUNCTION compass_prune_webhook_deliveries(age interval, batch integer) RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
  WITH gone AS (
    DELETE FROM webhook_deliveries WHERE id IN (
      SELECT id FROM webhook_deliveries WHERE finished_at < now() - age LIMIT batch)
    RETURNING 1
  )
  SELECT count(*)::integer FROM gone
$$;

-- The operator's commands name endpoints and deliveries by id too.
CREATE OR REPLACE FUNCTION compass_workspace_of(object_id uuid) RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT workspace_id FROM (
    SELECT workspace_id FROM accounts WHERE id = object_id
    UNION ALL SELECT workspace_id FROM runners WHERE id = object_id
    UNION ALL SELECT workspace_id FROM credentials WHERE id = object_id
    UNION ALL SELECT workspace_id FROM webhook_endpoints WHERE id = object_id
    UNION ALL SELECT workspace_id FROM webhook_deliveries WHERE id = object_id
  ) found LIMIT 1
$$;

DO $$
DECLARE
  f text;
BEGIN
  FOREACH f IN ARRAY ARRAY[
    'compass_webhook_backlog(integer)',
    'compass_claim_webhook_deliveries(uuid, interval, integer, integer, uuid[], integer[])',
    'compass_finish_webhook_attempts(uuid[], integer[], boolean[], interval[], integer[], '
      'double precision[], text[], text[], text[])',
    'compass_prune_webhook_deliveries(interval, integer)'
  ] LOOP
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC, compass_app', f);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO compass_maintenance', f);
  END LOOP;
END
$$;
