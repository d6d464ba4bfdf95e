-- after: 0008

-- Writes a locked, open ask's ending (an expiry timed at the deadline), which
-- may also be a rule's (`rule`, recorded in the
-- ending and its history entry) and may append the vote that made it.
CREATE OR REPLACE FUNCTION compass_write_ending(
  m messages, idx int, kind text, actor uuid, surface text, reason text,
  answered jsonb DEFAULT NULL, rule uuid DEFAULT NULL, vote jsonb DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  stored jsonb := m.blocks -> idx -> 'ask';
  ask text := stored ->> 'ask_id';
  ended_at timestamptz := now();
  ending jsonb;
  asked jsonb;
  written messages%ROWTYPE;
BEGIN
  IF kind = 'expired' AND stored ? 'deadline' THEN
    ended_at := (stored ->> 'deadline')::timestamptz;
  END IF;
  ending := jsonb_strip_nulls(jsonb_build_object(
    'kind', kind, 'actor_id', actor,
    'actor_handle', (SELECT handle FROM accounts WHERE id = actor),
    'at', ended_at, 'surface', surface, 'reason', nullif(reason, ''),
    'standing_answer_id', rule));
  asked := stored || jsonb_build_object('ending', ending);
  IF vote IS NOT NULL THEN
    asked := asked || jsonb_build_object('quorum_votes',
      coalesce(stored -> 'quorum_votes', '[]') || jsonb_build_array(vote));
  END IF;
  IF kind = 'answered' THEN
    asked := asked || jsonb_build_object('questions', answered, 'answered', true);
  ELSIF kind IN ('withdrawn_by_agent', 'withdrawn_by_owner') THEN
    asked := asked || '{"cancelled": true}';
  ELSIF kind = 'expired' THEN
    asked := asked || jsonb_build_object('questions', (
      SELECT jsonb_agg(q || '{"timed_out": true}' ORDER BY i)
      FROM jsonb_array_elements(stored -> 'questions') WITH ORDINALITY AS x(q, i)));
  END IF;
  UPDATE messages SET blocks = jsonb_set(blocks, ARRAY[idx::text, 'ask'], asked)
    WHERE id = m.id RETURNING * INTO written;
  IF stored ? 'deadline' THEN
    UPDATE asks SET due_at = NULL WHERE ask_id = ask;
  END IF;
  INSERT INTO ask_history (
      workspace_id, ask_id, kind, actor_id, surface, reason, at, standing_answer_id)
    VALUES (m.workspace_id, ask, kind, actor, surface, coalesce(reason, ''), ended_at, rule);
  RETURN compass_message_json(written, (SELECT handle FROM accounts WHERE id = m.author_id));
END
$$;
REVOKE ALL ON FUNCTION compass_write_ending(m messages, idx integer, kind text, actor uuid, surface text, reason text, answered jsonb, rule uuid, vote jsonb) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_write_ending(m messages, idx integer, kind text, actor uuid, surface text, reason text, answered jsonb, rule uuid, vote jsonb) TO PUBLIC;
