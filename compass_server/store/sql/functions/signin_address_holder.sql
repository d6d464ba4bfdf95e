-- after: 0053

-- Whose a sign-in address is and whether it still opens, read without
-- using it (a link preview, the page that asks before signing in).
CREATE OR REPLACE FUNCTION compass_signin_address_holder(digest bytea)
RETURNS TABLE (status text, handle text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
  SELECT CASE
           WHEN s.used_at IS NOT NULL THEN 'used'
           WHEN s.expires_at <= now() THEN 'expired'
           WHEN a.deactivated_at IS NOT NULL THEN 'deactivated'
           ELSE 'open'
         END,
         a.handle
  FROM signin_addresses s JOIN accounts a ON a.id = s.account_id
  WHERE s.token_hash = digest
$$;
REVOKE ALL ON FUNCTION compass_signin_address_holder(bytea) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_signin_address_holder(bytea) TO compass_maintenance;
