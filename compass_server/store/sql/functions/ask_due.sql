-- after: 0020

-- Whether the ask's deadline has passed by the clock now: a write that
-- waited for the row lock decides when it holds it, not when it began.
CREATE OR REPLACE FUNCTION compass_ask_due(stored jsonb) RETURNS boolean
LANGUAGE sql VOLATILE AS $$
  SELECT stored ? 'deadline' AND (stored ->> 'deadline')::timestamptz <= clock_timestamp()
$$;
REVOKE ALL ON FUNCTION compass_ask_due(stored jsonb) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_ask_due(stored jsonb) TO PUBLIC;
