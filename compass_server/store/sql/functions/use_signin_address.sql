-- after: 0053

-- A browser uses a sign-in address: once, before it expires, for a person
-- still active. Marks it used and makes the browser session it opens (as a
-- provider's sign-in does) in one step; `status` says why not otherwise
-- (unknown, used, expired, deactivated) and nothing is written.
CREATE OR REPLACE FUNCTION compass_use_signin_address(
  digest bytea, session_digest bytea, session_id uuid, idle interval, lifetime interval,
  agent text
) RETURNS TABLE (status text, account_id uuid, handle text, next text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
  addr signin_addresses%ROWTYPE;
  who accounts%ROWTYPE;
BEGIN
  SELECT * INTO addr FROM signin_addresses s WHERE s.token_hash = digest FOR UPDATE;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'unknown', NULL::uuid, NULL::text, NULL::text;
    RETURN;
  END IF;
  SELECT * INTO who FROM accounts a WHERE a.id = addr.account_id;
  IF addr.used_at IS NOT NULL THEN
    RETURN QUERY SELECT 'used', who.id, who.handle, addr.next;
  ELSIF addr.expires_at <= now() THEN
    RETURN QUERY SELECT 'expired', who.id, who.handle, addr.next;
  ELSIF who.deactivated_at IS NOT NULL THEN
    RETURN QUERY SELECT 'deactivated', who.id, who.handle, addr.next;
  ELSE
    UPDATE signin_addresses SET used_at = now() WHERE id = addr.id;
    INSERT INTO credentials
      (token_hash, id, workspace_id, account_id, label, expires_at, kind, idle, ends_at,
       user_agent)
    VALUES (session_digest, session_id, addr.workspace_id, who.id, 'sign-in address',
            now() + least(idle, lifetime), 'session', idle, now() + lifetime, agent);
    RETURN QUERY SELECT 'signed_in', who.id, who.handle, addr.next;
  END IF;
END
$$;
REVOKE ALL ON FUNCTION compass_use_signin_address(bytea, bytea, uuid, interval, interval, text) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_use_signin_address(bytea, bytea, uuid, interval, interval, text) TO compass_maintenance;
