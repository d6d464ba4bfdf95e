-- after: 0023

-- Whether a quorum ask can still reach its quorum with `more` declines
-- besides those voted: its answers and the named people yet to vote.
CREATE OR REPLACE FUNCTION compass_quorum_reachable(stored jsonb, more int) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_array_length(stored -> 'answerer_ids')
         - count(*) FILTER (WHERE v ->> 'kind' = 'decline') - more
         >= (stored ->> 'quorum')::int
  FROM jsonb_array_elements(coalesce(stored -> 'quorum_votes', '[]')) v
$$;
REVOKE ALL ON FUNCTION compass_quorum_reachable(stored jsonb, more integer) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_quorum_reachable(stored jsonb, more integer) TO PUBLIC;
