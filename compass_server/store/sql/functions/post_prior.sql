-- after: 0025

-- A message posted before, as a post's result that posted nothing.
CREATE OR REPLACE FUNCTION compass_post_prior(id uuid, outcome text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('message', compass_message_json(m, acc.handle), 'numbered', true,
                            'outcome', outcome, 'read_at', clock_timestamp())
  FROM messages m JOIN accounts acc ON acc.id = m.author_id
  WHERE m.id = compass_post_prior.id
$$;
REVOKE ALL ON FUNCTION compass_post_prior(id uuid, outcome text) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_post_prior(id uuid, outcome text) TO PUBLIC;
