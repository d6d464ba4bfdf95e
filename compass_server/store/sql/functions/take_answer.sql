-- after: 0023

-- A person's answer to a locked, open ask that lets them answer, before its
-- deadline, by them or by their rule (`rule`): the ending of a plain ask,
-- or of a quorum ask at its K-th answer, with the ask_answer message (a
-- quorum's carries every answer); otherwise the vote alone. Returns
-- {status: taken, ask_message, answer_message}, {status: recorded,
-- ask_message}, or {status: voted_answer | voted_decline} for a person who
-- already voted. Appends no events and moves no presence: its callers do.
CREATE OR REPLACE FUNCTION compass_take_answer(
  ws uuid, m messages, idx int, actor uuid, answered jsonb, answer_id uuid, surface text,
  rule uuid
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  stored jsonb := m.blocks -> idx -> 'ask';
  quorum int := coalesce((stored ->> 'quorum')::int, 0);
  voted text;
  vote jsonb;
  answer_block jsonb;
  answer_row messages%ROWTYPE;
  ask_msg jsonb;
BEGIN
  IF quorum > 0 THEN
    voted := compass_voted(stored, actor);
    IF voted IS NOT NULL THEN
      RETURN jsonb_build_object('status', 'voted_' || voted);
    END IF;
    vote := compass_vote(actor, 'answer', answered, NULL, surface, rule);
    IF (SELECT count(*) FROM jsonb_array_elements(coalesce(stored -> 'quorum_votes', '[]')) v
        WHERE v ->> 'kind' = 'answer') + 1 < quorum THEN
      RETURN jsonb_build_object('status', 'recorded', 'ask_message',
        compass_write_vote(m, idx, vote, 'quorum_answer', actor, surface, NULL, rule));
    END IF;
    ask_msg := compass_write_ending(
      m, idx, 'answered', actor, surface, NULL, stored -> 'questions', rule, vote);
    answer_block := jsonb_build_object(
      'ask_id', stored ->> 'ask_id', 'ask_message_id', m.id, 'questions', stored -> 'questions',
      'quorum_votes', (
        SELECT jsonb_agg(v ORDER BY i)
        FROM jsonb_array_elements(coalesce(stored -> 'quorum_votes', '[]') || jsonb_build_array(vote))
          WITH ORDINALITY AS x (v, i)
        WHERE v ->> 'kind' = 'answer'));
  ELSE
    ask_msg := compass_write_ending(m, idx, 'answered', actor, surface, NULL, answered, rule);
    answer_block := jsonb_build_object(
      'ask_id', stored ->> 'ask_id', 'ask_message_id', m.id, 'questions', answered);
  END IF;
  INSERT INTO messages (id, workspace_id, channel_id, author_id, blocks)
    VALUES (answer_id, ws, m.channel_id, actor, jsonb_build_array(jsonb_build_object(
      'kind', 'ask_answer', 'ask_answer', answer_block)))
    RETURNING * INTO answer_row;
  RETURN jsonb_build_object('status', 'taken', 'ask_message', ask_msg, 'answer_message',
    compass_message_json(answer_row, (SELECT handle FROM accounts WHERE id = actor)));
END
$$;
REVOKE ALL ON FUNCTION compass_take_answer(ws uuid, m messages, idx integer, actor uuid, answered jsonb, answer_id uuid, surface text, rule uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_take_answer(ws uuid, m messages, idx integer, actor uuid, answered jsonb, answer_id uuid, surface text, rule uuid) TO PUBLIC;
