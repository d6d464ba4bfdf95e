-- after: 0008

-- The people an escalation added may answer or decline as the named may.
CREATE OR REPLACE FUNCTION compass_may_answer(stored jsonb, actor uuid) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT NOT (stored ? 'answerer_ids') OR (stored -> 'answerer_ids') ? actor::text
    OR EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(stored -> 'follow_up_steps', '[]')) s
               WHERE s ->> 'kind' = 'escalated' AND (s -> 'account_ids') ? actor::text)
$$;
REVOKE ALL ON FUNCTION compass_may_answer(stored jsonb, actor uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_may_answer(stored jsonb, actor uuid) TO PUBLIC;
