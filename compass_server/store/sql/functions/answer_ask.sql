-- after: 0003

-- A person answers an ask, under its row lock: refused in the order
-- visibility, permission, state; at or after the deadline the ask expires
-- instead. Through compass_take_answer, a quorum ask's answer
-- short of its quorum is a vote (its MessageUpdated alone: the agent hears
-- nothing until the ending). `standing` ({id, seconds, include_subagents,
-- most}, or NULL) makes the answer a standing answer in the same
-- transaction.
CREATE OR REPLACE FUNCTION compass_answer_ask(
  cred bytea, actor uuid, ask text, answered jsonb, answer_id uuid, surface text, standing jsonb
) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
  proof record;
  ws uuid;
  last_id bigint;
  locked record;
  stored jsonb;
  state text;
  voted text;
  made jsonb;
  taken jsonb;
  change jsonb;
BEGIN
  proof := compass_proof(cred, actor);
  ws := proof.ws;
  IF ws IS NULL THEN
    RETURN jsonb_build_object('status', 'unscoped');
  END IF;
  IF NOT proof.vouched THEN
    RETURN jsonb_build_object('status', 'not_found');
  END IF;
  SELECT * INTO locked FROM compass_lock_ask(ask, actor);
  IF (locked.m).id IS NULL THEN
    RETURN jsonb_build_object('status', 'not_found');
  END IF;
  stored := (locked.m).blocks -> locked.idx -> 'ask';
  IF NOT compass_may_answer(stored, actor) THEN
    RETURN jsonb_build_object('status', 'not_named');
  END IF;
  state := compass_ask_standing(stored);
  IF state <> 'open' THEN
    RETURN jsonb_build_object('status', state);
  END IF;
  IF compass_ask_due(stored) THEN
    RETURN compass_expire_locked(ws, locked.m, locked.idx);
  END IF;
  voted := compass_voted(stored, actor);
  IF voted IS NOT NULL THEN
    RETURN jsonb_build_object('status', 'voted_' || voted);
  END IF;
  -- Nothing rewrites an ask's content: only the answer keys may differ.
  IF (SELECT jsonb_agg(q - 'chosen_option_ids' - 'custom_text' - 'timed_out' ORDER BY i)
        FROM jsonb_array_elements(answered) WITH ORDINALITY AS x(q, i))
     IS DISTINCT FROM stored -> 'questions' THEN
    RETURN jsonb_build_object('status', 'content_mismatch');
  END IF;
  IF standing IS NOT NULL THEN
    made := compass_make_standing(ws, actor, locked.m, stored, answered, standing);
    IF made ? 'status' THEN
      RETURN made;
    END IF;
  END IF;
  taken := compass_take_answer(
    ws, locked.m, locked.idx, actor, answered, answer_id, surface, NULL);
  IF taken ->> 'status' = 'recorded' THEN
    last_id := compass_append_events_to(ws, ARRAY['message_updated'],
      ARRAY[(locked.m).channel_id], ARRAY[taken -> 'ask_message']);
  ELSE
    change := compass_presence_change((locked.m).author_id, -1);
    last_id := compass_append_ending(ws, (locked.m).channel_id, taken -> 'ask_message', change,
      taken -> 'answer_message');
  END IF;
  RETURN taken || jsonb_build_object('numbered', last_id IS NOT NULL)
    || jsonb_strip_nulls(jsonb_build_object('standing', made));
END
$$;
GRANT CREATE ON SCHEMA public TO compass_writer;
ALTER FUNCTION compass_answer_ask(cred bytea, actor uuid, ask text, answered jsonb, answer_id uuid, surface text, standing jsonb) OWNER TO compass_writer;
REVOKE CREATE ON SCHEMA public FROM compass_writer;
REVOKE ALL ON FUNCTION compass_answer_ask(cred bytea, actor uuid, ask text, answered jsonb, answer_id uuid, surface text, standing jsonb) FROM PUBLIC, compass_app, compass_maintenance;
GRANT EXECUTE ON FUNCTION compass_answer_ask(cred bytea, actor uuid, ask text, answered jsonb, answer_id uuid, surface text, standing jsonb) TO compass_app;
