-- after: 0055

-- Whom and what a reply address answers: the row of its token's digest,
-- with the person's mail address and handle; no row for an address the
-- server never sent, or a person deactivated since.
CREATE OR REPLACE FUNCTION compass_mail_reply(digest bytea)
RETURNS TABLE (workspace_id uuid, ask_id text, account_id uuid, email text, handle text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT r.workspace_id, r.ask_id, r.account_id, a.email, a.handle
  FROM mail_reply_addresses r JOIN accounts a ON a.id = r.account_id
  WHERE r.token_hash = digest AND a.deactivated_at IS NULL
$$;
REVOKE ALL ON FUNCTION compass_mail_reply(digest bytea) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_mail_reply(digest bytea) TO compass_maintenance;
