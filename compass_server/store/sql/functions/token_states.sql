-- after: 0012

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
REVOKE ALL ON FUNCTION compass_token_states(ids uuid[]) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_token_states(ids uuid[]) TO compass_maintenance;
