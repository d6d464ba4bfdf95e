-- Tokens get a lifecycle: an id to name them by (the digest stays the key
-- sign-in looks up), a label, an expiry, a revocation, the token a rotation
-- replaced them with, and about when they last signed a call in. People get
-- a role in their workspace: the first human of each is its admin.

ALTER TABLE credentials
  ADD COLUMN id uuid NOT NULL DEFAULT gen_random_uuid(),
  ADD COLUMN label text NOT NULL DEFAULT '',
  ADD COLUMN expires_at timestamptz,
  ADD COLUMN revoked_at timestamptz,
  ADD COLUMN replaced_by uuid,
  ADD COLUMN last_used_at timestamptz;
ALTER TABLE credentials ADD CONSTRAINT credentials_id_key UNIQUE (id);
ALTER TABLE credentials ADD CONSTRAINT credentials_replaced_by_fkey
  FOREIGN KEY (replaced_by) REFERENCES credentials (id);
CREATE INDEX credentials_listing ON credentials (workspace_id, created_at DESC, id DESC);
CREATE INDEX credentials_account ON credentials (account_id) WHERE account_id IS NOT NULL;
CREATE INDEX credentials_runner ON credentials (runner_id) WHERE runner_id IS NOT NULL;

ALTER TABLE accounts
  ADD COLUMN role text NOT NULL DEFAULT 'member' CHECK (role IN ('member', 'admin')),
  ADD CONSTRAINT accounts_agents_are_members CHECK (kind = 'human' OR role = 'member');
UPDATE accounts SET role = 'admin' WHERE id IN (
  SELECT DISTINCT ON (workspace_id) id FROM accounts
  WHERE kind = 'human' ORDER BY workspace_id, created_at, id);

-- Sign-in, before the workspace is known: looks a token up by digest as the
-- owner and returns only what it names and whether it still signs in, with
-- the seconds it has left by the database's clock. A token that signs in is
-- marked used at most once a minute, never waiting on another's mark.
DROP FUNCTION compass_credential(bytea);
CREATE FUNCTION compass_sign_in(digest bytea)
RETURNS TABLE (
  token_id uuid, workspace_id uuid, account_id uuid, runner_id uuid, kind text,
  revoked boolean, expires_in double precision
)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
#variable_conflict use_column
BEGIN
  UPDATE credentials SET last_used_at = now()
  WHERE token_hash = (
    SELECT c.token_hash FROM credentials c
    WHERE c.token_hash = digest AND c.revoked_at IS NULL
      AND (c.expires_at IS NULL OR c.expires_at > now())
      AND (c.last_used_at IS NULL OR c.last_used_at < now() - interval '1 minute')
    FOR UPDATE SKIP LOCKED);
  RETURN QUERY
    SELECT c.id, c.workspace_id, c.account_id, c.runner_id, a.kind, c.revoked_at IS NOT NULL,
           extract(epoch FROM c.expires_at - now())::double precision
    FROM credentials c LEFT JOIN accounts a ON a.id = c.account_id
    WHERE c.token_hash = digest;
END
$$;
REVOKE ALL ON FUNCTION compass_sign_in(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_sign_in(bytea) TO compass_app;

-- Revocations are numbered; each server records in its `servers` row the
-- last one it has applied (dropped from its cache), so a revocation can wait
-- until every live server has, and the next call anywhere is refused. A
-- server registering starts at the current number: it has nothing cached.
CREATE SEQUENCE compass_access_seq;
GRANT USAGE, SELECT ON SEQUENCE compass_access_seq TO compass_app;
CREATE FUNCTION compass_access_position() RETURNS bigint
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM compass_access_seq
$$;
ALTER TABLE servers ADD COLUMN access_seen bigint NOT NULL DEFAULT compass_access_position();

-- Takes an agent away from a runner: removes the assignment (after any bind
-- of it in flight, which holds a key-share lock on the row), the sessions it
-- bound, and recomputes the agent's presence; every server hears it and
-- unbinds the sessions it holds. An agent not assigned changes nothing.
-- Returns how many sessions were bound and whether the presence moved (its
-- event is numbered after commit).
CREATE FUNCTION compass_unassign_agent(runner uuid, agent uuid)
RETURNS TABLE (sessions integer, presence_changed boolean)
LANGUAGE plpgsql AS $$
DECLARE
  n integer;
BEGIN
  DELETE FROM runner_agents ra WHERE ra.runner_id = runner AND ra.agent_id = agent;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 0, false;
    RETURN;
  END IF;
  DELETE FROM agent_sessions s WHERE s.runner_id = runner AND s.agent_id = agent;
  GET DIAGNOSTICS n = ROW_COUNT;
  PERFORM pg_notify('compass_access', 'unassign:' || runner::text || ':' || agent::text);
  RETURN QUERY SELECT n, compass_refresh_presence(agent);
END
$$;
