-- after: 0023

-- The rule an answer asked for (`terms`: {id, seconds, include_subagents,
-- most}), made for the person answering the locked ask `m`. Returns
-- {standing_answer_id, created_at, expires_at}, or {status} when it can't be
-- made: the ask is not an agent's, or the person has `most` rules in force.
CREATE OR REPLACE FUNCTION compass_make_standing(
  ws uuid, actor uuid, m messages, stored jsonb, answered jsonb, terms jsonb
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  made jsonb;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM accounts WHERE id = m.author_id AND kind = 'agent') THEN
    RETURN jsonb_build_object('status', 'standing_not_agent');
  END IF;
  IF (SELECT count(*) FROM standing_answers
      WHERE account_id = actor AND revoked_at IS NULL AND expires_at > now())
     >= (terms ->> 'most')::int THEN
    RETURN jsonb_build_object('status', 'standing_full');
  END IF;
  INSERT INTO standing_answers (
      id, workspace_id, account_id, agent_id, include_subagents, questions, made_from_ask_id,
      expires_at)
    VALUES ((terms ->> 'id')::uuid, ws, actor, m.author_id,
      coalesce((terms ->> 'include_subagents')::boolean, false), answered, stored ->> 'ask_id',
      now() + make_interval(secs => (terms ->> 'seconds')::double precision))
    RETURNING jsonb_build_object(
      'standing_answer_id', id, 'created_at', created_at, 'expires_at', expires_at) INTO made;
  RETURN made;
END
$$;
REVOKE ALL ON FUNCTION compass_make_standing(ws uuid, actor uuid, m messages, stored jsonb, answered jsonb, terms jsonb) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_make_standing(ws uuid, actor uuid, m messages, stored jsonb, answered jsonb, terms jsonb) TO PUBLIC;
