-- after: 0026

-- Whether an entry of this kind ends its ask.
CREATE OR REPLACE FUNCTION compass_history_ends(kind text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT kind NOT IN ('posted', 'quorum_answer', 'quorum_decline')
$$;
REVOKE ALL ON FUNCTION compass_history_ends(kind text) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_history_ends(kind text) TO PUBLIC;
