-- One-time sign-in addresses: the operator prints one for a person (the
-- tour, a first sign-in without an identity provider); opening it and
-- pressing its button makes an ordinary browser session, once, before it
-- expires. Only its secret's digest is kept.
CREATE TABLE signin_addresses (
  id uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  account_id uuid NOT NULL,
  token_hash bytea NOT NULL UNIQUE,
  -- Where the browser goes once signed in: a path of the page's own.
  next text NOT NULL DEFAULT '/' CHECK (next LIKE '/%' AND next NOT LIKE '//%'),
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  used_at timestamptz,
  FOREIGN KEY (workspace_id, account_id) REFERENCES accounts (workspace_id, id) ON DELETE CASCADE
);
ALTER TABLE signin_addresses ENABLE ROW LEVEL SECURITY;
-- The operator makes them; a browser uses one through compass_use_signin_address.
REVOKE ALL ON signin_addresses FROM compass_app;
GRANT SELECT, INSERT ON signin_addresses TO compass_maintenance;
