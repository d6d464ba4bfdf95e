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
CREATE POLICY workspace_only ON identities TO compass_app, compass_maintenance
  USING (workspace_id = (SELECT compass_workspace()))
  WITH CHECK (workspace_id = (SELECT compass_workspace()));
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

-- --- sign-in ------------------------------------------------------------------------
-- As before, plus the credential's kind, the ask a link opens, and whether
-- its account was deactivated (it then signs nothing in). A session in use
-- moves its idle end, at most once a minute like the use mark.
DROP FUNCTION compass_sign_in(bytea);
CREATE FUNCTION compass_sign_in(digest bytea)
RETURNS TABLE (
  token_id uuid, workspace_id uuid, account_id uuid, runner_id uuid, kind text,
  revoked boolean, expires_in double precision, via text, ask_id text, deactivated boolean
)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
#variable_conflict use_column
BEGIN
  UPDATE credentials c SET last_used_at = now(),
    expires_at = CASE WHEN c.kind = 'session' THEN least(c.ends_at, now() + c.idle)
                      ELSE c.expires_at END
  WHERE c.token_hash = (
    SELECT c2.token_hash FROM credentials c2
    WHERE c2.token_hash = digest AND c2.revoked_at IS NULL AND c2.kind <> 'link'
      AND (c2.expires_at IS NULL OR c2.expires_at > now())
      AND (c2.last_used_at IS NULL OR c2.last_used_at < now() - interval '1 minute')
    FOR UPDATE SKIP LOCKED);
  RETURN QUERY
    SELECT c.id, c.workspace_id, c.account_id, c.runner_id, a.kind, c.revoked_at IS NOT NULL,
           extract(epoch FROM c.expires_at - now())::double precision, c.kind, c.ask_id,
           a.deactivated_at IS NOT NULL
    FROM credentials c LEFT JOIN accounts a ON a.id = c.account_id
    WHERE c.token_hash = digest;
END
$$;
REVOKE ALL ON FUNCTION compass_sign_in(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_sign_in(bytea) TO compass_app;

-- A server's re-check of the streams it holds: as before, and a session
-- whose page holds a stream open is in use (its idle end moves, at most
-- once a minute).
CREATE OR REPLACE FUNCTION compass_token_states(ids uuid[])
RETURNS TABLE (id uuid, expires_in double precision)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
#variable_conflict use_column
BEGIN
  UPDATE credentials c SET last_used_at = now(), expires_at = least(c.ends_at, now() + c.idle)
  WHERE c.id = ANY(ids) AND c.kind = 'session' AND c.revoked_at IS NULL
    AND c.expires_at > now() AND c.last_used_at < now() - interval '1 minute';
  RETURN QUERY
    SELECT c.id, extract(epoch FROM c.expires_at - now())::double precision
    FROM credentials c
    WHERE c.id = ANY(ids) AND c.revoked_at IS NULL
      AND (c.expires_at IS NULL OR c.expires_at > now());
END
$$;
REVOKE ALL ON FUNCTION compass_token_states(uuid[]) FROM PUBLIC, compass_app;
GRANT EXECUTE ON FUNCTION compass_token_states(uuid[]) TO compass_maintenance;

-- --- one-ask links ---------------------------------------------------------------------

-- What a link's page needs before it can act: the link's account, ask,
-- workspace and state, read without marking anything (mail scanners open
-- links; opening one changes nothing). Unknown digests return no row.
CREATE FUNCTION compass_open_link(digest bytea)
RETURNS TABLE (
  link_id uuid, workspace_id uuid, account_id uuid, ask_id text, revoked boolean,
  expired boolean, deactivated boolean
)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT c.id, c.workspace_id, c.account_id, c.ask_id, c.revoked_at IS NOT NULL,
         c.expires_at IS NOT NULL AND c.expires_at <= now(), a.deactivated_at IS NOT NULL
  FROM credentials c JOIN accounts a ON a.id = c.account_id
  WHERE c.token_hash = digest AND c.kind = 'link'
$$;
REVOKE ALL ON FUNCTION compass_open_link(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_open_link(bytea) TO compass_app, compass_maintenance;

-- Mints a link to one ask for one person of a workspace (the surfaces that
-- notify people run as compass_maintenance, as the operator does): the ask must be
-- open; a person it names, or, when it names nobody, a person in its channel
-- (the one a notification is being sent to). Returns 'minted', or why not:
-- 'no_ask', 'ended', 'no_person', 'not_named'.
CREATE FUNCTION compass_mint_link(
  ws uuid, ask text, person uuid, digest bytea, link uuid, lifetime interval
) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  m messages%ROWTYPE;
  stored jsonb;
BEGIN
  SELECT msg.* INTO m FROM asks k JOIN messages msg ON msg.id = k.message_id
  WHERE k.ask_id = ask AND k.workspace_id = ws;
  IF NOT FOUND THEN
    RETURN 'no_ask';
  END IF;
  SELECT b.block -> 'ask' INTO stored FROM jsonb_array_elements(m.blocks) AS b(block)
  WHERE b.block ->> 'kind' = 'ask' AND b.block -> 'ask' ->> 'ask_id' = ask;
  IF compass_ask_standing(stored) <> 'open' THEN
    RETURN 'ended';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = person AND a.workspace_id = ws
                 AND a.kind = 'human' AND a.deactivated_at IS NULL) THEN
    RETURN 'no_person';
  END IF;
  IF NOT compass_may_answer(stored, person) OR NOT EXISTS (
      SELECT 1 FROM channel_members cm WHERE cm.channel_id = m.channel_id
        AND cm.account_id = person) THEN
    RETURN 'not_named';
  END IF;
  INSERT INTO credentials (token_hash, id, workspace_id, account_id, label, expires_at, kind, ask_id)
  VALUES (digest, link, ws, person, 'one-ask link', now() + lifetime, 'link', ask);
  RETURN 'minted';
END
$$;
REVOKE ALL ON FUNCTION compass_mint_link(uuid, text, uuid, bytea, uuid, interval) FROM PUBLIC, compass_app;
GRANT EXECUTE ON FUNCTION compass_mint_link(uuid, text, uuid, bytea, uuid, interval) TO compass_maintenance;
