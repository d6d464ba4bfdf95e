-- after: 0057

-- Proves the transaction's scope, once: the workspace of the credential
-- (while it still signs in) and, when `actor` is named, whether the
-- credential vouches for it (its own account, or an agent assigned to its
-- runner). Keeps both in compass_scopes for this backend's transaction,
-- where row-level security reads them (compass_workspace_now,
-- compass_actor_now) with no query of its own; names both in
-- compass.credential and compass.actor too. It takes no workspace and no
-- account it doesn't prove, and nothing else writes compass_scopes: a
-- caller can't claim another workspace. `ws` is NULL when the credential
-- scopes nothing; `vouched` says whether `actor` is the account it may act as.
-- Proved once per transaction: the same credential and account proved again
-- (every write function of the transaction proves what it is given) take
-- the note, which is what row-level security already reads.
CREATE OR REPLACE FUNCTION compass_proof(cred bytea, actor uuid, OUT ws uuid, OUT vouched boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
  -- One statement: the note when this transaction proved the same already,
  -- else the proof and its note; and the names in the settings.
  WITH noted AS (
    SELECT s.workspace_id, s.actor_id FROM compass_scopes s
    WHERE s.pid = pg_backend_pid() AND s.at = now()
      AND s.credential = cred AND s.asked IS NOT DISTINCT FROM actor
  ), proof AS (
    SELECT (SELECT c.workspace_id FROM credentials c
            WHERE c.token_hash = cred
              AND (c.revoked_at IS NULL OR c.revoked_at >= now())
              AND (c.expires_at IS NULL OR c.expires_at > now())) AS workspace_id,
           (SELECT actor FROM credentials c
            WHERE actor IS NOT NULL AND c.token_hash = cred
              AND (c.revoked_at IS NULL OR c.revoked_at >= now())
              AND (c.expires_at IS NULL OR c.expires_at > now())
              AND (c.account_id = actor OR EXISTS (
                SELECT 1 FROM runner_agents ra
                WHERE ra.runner_id = c.runner_id AND ra.agent_id = actor))) AS actor_id
    WHERE NOT EXISTS (SELECT 1 FROM noted)
  ), proved AS (
    INSERT INTO compass_scopes (pid, at, workspace_id, actor_id, credential, asked)
    SELECT pg_backend_pid(), now(), proof.workspace_id, proof.actor_id, cred, actor FROM proof
    ON CONFLICT (pid) DO UPDATE
      SET at = EXCLUDED.at, workspace_id = EXCLUDED.workspace_id, actor_id = EXCLUDED.actor_id,
          credential = EXCLUDED.credential, asked = EXCLUDED.asked
    RETURNING workspace_id, actor_id
  ), scope AS (
    SELECT workspace_id, actor_id FROM noted
    UNION ALL
    SELECT workspace_id, actor_id FROM proved
  )
  SELECT scope.workspace_id, actor IS NOT NULL AND scope.actor_id IS NOT DISTINCT FROM actor
    INTO ws, vouched FROM scope
  WHERE pg_catalog.set_config('compass.credential', pg_catalog.encode(cred, 'hex'), true)
          IS NOT NULL
    AND pg_catalog.set_config('compass.actor', coalesce(actor::text, ''), true) IS NOT NULL;
END
$$;
REVOKE ALL ON FUNCTION compass_proof(cred bytea, actor uuid, OUT ws uuid, OUT vouched boolean) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_proof(cred bytea, actor uuid, OUT ws uuid, OUT vouched boolean) TO PUBLIC;
