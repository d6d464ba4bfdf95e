-- after: 0023

CREATE OR REPLACE FUNCTION compass_voted(stored jsonb, actor uuid) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN (
    SELECT v ->> 'kind' FROM jsonb_array_elements(coalesce(stored -> 'quorum_votes', '[]')) v
    WHERE v ->> 'account_id' = actor::text
    LIMIT 1);
END
$$;
REVOKE ALL ON FUNCTION compass_voted(stored jsonb, actor uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_voted(stored jsonb, actor uuid) TO PUBLIC;
