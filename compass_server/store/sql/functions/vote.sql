-- after: 0023

-- A named person's vote: {account_id, handle, kind: answer | decline,
-- answers: [{question_id, chosen_option_ids, custom_text}], reason, at,
-- surface, standing_answer_id}, absent keys for empty values.
CREATE OR REPLACE FUNCTION compass_vote(
  actor uuid, kind text, answered jsonb, reason text, surface text, rule uuid
) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_strip_nulls(jsonb_build_object(
    'account_id', actor, 'handle', (SELECT handle FROM accounts WHERE id = actor),
    'kind', kind,
    'answers', (SELECT jsonb_agg(jsonb_build_object(
                  'question_id', q -> 'question_id', 'chosen_option_ids', q -> 'chosen_option_ids',
                  'custom_text', q -> 'custom_text') ORDER BY i)
                FROM jsonb_array_elements(answered) WITH ORDINALITY AS x (q, i)),
    'reason', nullif(reason, ''), 'at', now(), 'surface', surface, 'standing_answer_id', rule))
$$;
REVOKE ALL ON FUNCTION compass_vote(actor uuid, kind text, answered jsonb, reason text, surface text, rule uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_vote(actor uuid, kind text, answered jsonb, reason text, surface text, rule uuid) TO PUBLIC;
