-- after: 0023

-- Writes a vote that doesn't end the ask (a locked, open one): appended to
-- its votes, with its history entry. Returns the ask's message.
CREATE OR REPLACE FUNCTION compass_write_vote(
  m messages, idx int, vote jsonb, kind text, actor uuid, surface text, reason text, rule uuid
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  stored jsonb := m.blocks -> idx -> 'ask';
  written messages%ROWTYPE;
BEGIN
  UPDATE messages SET blocks = jsonb_set(blocks, ARRAY[idx::text, 'ask'], stored
      || jsonb_build_object('quorum_votes',
           coalesce(stored -> 'quorum_votes', '[]') || jsonb_build_array(vote)))
    WHERE id = m.id RETURNING * INTO written;
  INSERT INTO ask_history (workspace_id, ask_id, kind, actor_id, surface, reason, standing_answer_id)
    VALUES (m.workspace_id, stored ->> 'ask_id', kind, actor, surface, coalesce(reason, ''), rule);
  RETURN compass_message_json(written, (SELECT handle FROM accounts WHERE id = m.author_id));
END
$$;
REVOKE ALL ON FUNCTION compass_write_vote(m messages, idx integer, vote jsonb, kind text, actor uuid, surface text, reason text, rule uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_write_vote(m messages, idx integer, vote jsonb, kind text, actor uuid, surface text, reason text, rule uuid) TO PUBLIC;
