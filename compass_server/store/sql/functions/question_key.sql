-- after: 0023

-- A question as a standing answer matches it: its content without its id,
-- its recommendation or any answer state.
CREATE OR REPLACE FUNCTION compass_question_key(q jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT q - '{question_id,recommended,chosen_option_ids,custom_text,timed_out}'::text[]
$$;
REVOKE ALL ON FUNCTION compass_question_key(q jsonb) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_question_key(q jsonb) TO PUBLIC;
