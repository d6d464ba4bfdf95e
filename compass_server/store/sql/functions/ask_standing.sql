-- after: 0008

-- 'open', or how the ask ended (from the flags, for asks that ended before
-- endings were recorded).
CREATE OR REPLACE FUNCTION compass_ask_standing(stored jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN stored ? 'ending' THEN stored -> 'ending' ->> 'kind'
    WHEN coalesce((stored ->> 'answered')::boolean, false) THEN 'answered'
    WHEN coalesce((stored ->> 'cancelled')::boolean, false) THEN 'withdrawn_by_agent'
    ELSE 'open'
  END
$$;
REVOKE ALL ON FUNCTION compass_ask_standing(stored jsonb) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_ask_standing(stored jsonb) TO PUBLIC;
