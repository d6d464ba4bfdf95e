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

-- Revocations are numbered; each server records in its `servers` row the
-- last one it has applied (dropped from its cache), so a revocation can wait
-- until every live server has, and the next call anywhere is refused. A
-- server registering starts at the current number: it has nothing cached.
CREATE SEQUENCE compass_access_seq;
GRANT USAGE, SELECT ON SEQUENCE compass_access_seq TO compass_app;

ALTER TABLE servers ADD COLUMN access_seen bigint NOT NULL DEFAULT compass_access_position();
