-- after: 0010

CREATE OR REPLACE FUNCTION compass_access_position() RETURNS bigint
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM compass_access_seq
$$;
REVOKE ALL ON FUNCTION compass_access_position() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_access_position() TO PUBLIC;
