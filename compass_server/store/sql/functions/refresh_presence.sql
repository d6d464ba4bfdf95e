-- after: 0001

-- For a write whose only event is the presence change: recompute and append.
CREATE OR REPLACE FUNCTION compass_refresh_presence(agent uuid) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  change jsonb := compass_presence_change(agent);
BEGIN
  IF change IS NULL THEN
    RETURN false;
  END IF;
  PERFORM compass_append_events(ARRAY['presence_changed'], ARRAY[NULL::uuid], ARRAY[change]);
  RETURN true;
END
$$;
REVOKE ALL ON FUNCTION compass_refresh_presence(agent uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_refresh_presence(agent uuid) TO PUBLIC;
