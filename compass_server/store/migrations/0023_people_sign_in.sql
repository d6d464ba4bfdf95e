-- People sign in as people: OpenID Connect identities, browser sessions,
-- links that open one ask for one person, and accounts that can be
-- deactivated.
--
-- A browser session and a one-ask link are credentials like a token (the
-- digest of a secret), of another kind: row-level security, the actor's
-- proof, revocation and its notification to every server hold them as they
-- hold tokens. Sign-in with `authorization: Bearer` takes tokens only; the
-- server takes a session only from its cookie and a link only on its page.

-- --- accounts: an email to link a first sign-in by, and deactivation --------------

ALTER TABLE accounts
  ADD COLUMN email text,
  ADD COLUMN deactivated_at timestamptz;
CREATE UNIQUE INDEX accounts_email ON accounts (workspace_id, lower(email))
  WHERE email IS NOT NULL;

-- --- credentials of three kinds -----------------------------------------------------

ALTER TABLE credentials
  ADD COLUMN kind text NOT NULL DEFAULT 'token' CHECK (kind IN ('token', 'session', 'link')),
  -- A session: it ends `idle` after its last use, and at `ends_at` at the latest
  -- (expires_at moves between the two).
  ADD COLUMN idle interval,
  ADD COLUMN ends_at timestamptz,
  ADD COLUMN user_agent text NOT NULL DEFAULT '',
  -- A link: the one ask it opens, for its account.
  ADD COLUMN ask_id text,
  ADD CONSTRAINT credentials_session_shape
    CHECK (kind <> 'session' OR (account_id IS NOT NULL AND idle IS NOT NULL AND ends_at IS NOT NULL)),
  ADD CONSTRAINT credentials_link_shape
    CHECK ((kind = 'link') = (ask_id IS NOT NULL) AND (kind <> 'link' OR account_id IS NOT NULL)),
  ADD CONSTRAINT credentials_ask_fkey
    FOREIGN KEY (workspace_id, ask_id) REFERENCES asks (workspace_id, ask_id);
CREATE INDEX credentials_ask ON credentials (ask_id) WHERE ask_id IS NOT NULL;

GRANT SELECT (kind, idle, ends_at, user_agent, ask_id) ON credentials TO compass_app;
GRANT INSERT (kind, idle, ends_at, user_agent, ask_id) ON credentials TO compass_app;

-- --- identities: (issuer, subject) → an account of a workspace ---------------------

CREATE TABLE identities (
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  issuer text NOT NULL,
  subject text NOT NULL,
  account_id uuid NOT NULL,
  -- The email the provider vouched for at the last sign-in.
  email text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, issuer, subject),
  FOREIGN KEY (workspace_id, account_id) REFERENCES accounts (workspace_id, id)
);
CREATE INDEX identities_account ON identities (account_id);
ALTER TABLE identities ENABLE ROW LEVEL SECURITY;

GRANT SELECT ON identities TO compass_app;
GRANT SELECT, INSERT, UPDATE ON identities TO compass_maintenance;

-- --- sign-ins under way at a provider ---------------------------------------------
-- Not a workspace's yet: only compass_maintenance reads and writes them. The
-- state is stored as its digest; the nonce and the PKCE verifier live as long
-- as the attempt (minutes).

CREATE TABLE signin_attempts (
  state_hash bytea PRIMARY KEY,
  provider text NOT NULL,
  nonce text NOT NULL,
  code_verifier text NOT NULL,
  return_to text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX signin_attempts_expiry ON signin_attempts (expires_at);
REVOKE ALL ON signin_attempts FROM compass_app;
GRANT SELECT, INSERT, DELETE ON signin_attempts TO compass_maintenance;

-- --- one-ask links ---------------------------------------------------------------------
