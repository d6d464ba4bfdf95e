-- after: 0010

-- --- sign-in ------------------------------------------------------------------------
-- As before, plus the credential's kind, the ask a link opens, and whether
-- its account was deactivated (it then signs nothing in). A session in use
-- moves its idle end, at most once a minute like the use mark.
CREATE OR REPLACE FUNCTION compass_sign_in(digest bytea)
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
REVOKE ALL ON FUNCTION compass_sign_in(digest bytea) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_sign_in(digest bytea) TO compass_app;
