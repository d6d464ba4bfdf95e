-- after: 0031

CREATE OR REPLACE FUNCTION compass_next_follow_up() RETURNS timestamptz
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT min(follow_up_at) FROM asks WHERE follow_up_at IS NOT NULL
$$;
REVOKE ALL ON FUNCTION compass_next_follow_up() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_next_follow_up() TO compass_app, compass_maintenance;
