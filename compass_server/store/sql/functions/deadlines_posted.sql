-- after: 0020

-- A post announces its soonest deadline or first step.
CREATE OR REPLACE FUNCTION compass_deadlines_posted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  soonest timestamptz;
BEGIN
  SELECT least(min(due_at), min(follow_up_at)) INTO soonest FROM posted;
  IF soonest IS NOT NULL THEN
    PERFORM pg_notify('compass_deadlines', extract(epoch FROM soonest)::text);
  END IF;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION compass_deadlines_posted() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_deadlines_posted() TO PUBLIC;
