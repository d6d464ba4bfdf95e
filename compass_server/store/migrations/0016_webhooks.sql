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

