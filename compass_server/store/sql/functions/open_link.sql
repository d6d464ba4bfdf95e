-- after: 0021

-- What a link's page needs before it can act: the link's account, ask,
-- workspace and state, read without marking anything (mail scanners open
-- links; opening one changes nothing). Unknown digests return no row.
CREATE OR REPLACE FUNCTION compass_open_link(digest bytea)
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
REVOKE ALL ON FUNCTION compass_open_link(digest bytea) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_open_link(digest bytea) TO compass_app, compass_maintenance;
