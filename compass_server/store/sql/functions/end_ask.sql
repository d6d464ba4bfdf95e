-- after: 0008

-- Every ending but the answer and the expiry: a decline, the agent's
-- withdraw, its owner's; under the row lock, refused in the order visibility,
-- permission, state, and at or after the deadline the ask expires instead.
-- A named person's decline of a quorum ask is a
-- vote; it ends the ask declined unless the ask counts declines against the
-- quorum and the quorum can still be reached.
CREATE OR REPLACE FUNCTION compass_end_ask(
  cred bytea, actor uuid, ask text, kind text, surface text, reason text
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
  vote jsonb;
  ask_msg jsonb;
  change jsonb;
BEGIN
  IF kind NOT IN ('declined', 'withdrawn_by_agent', 'withdrawn_by_owner') THEN
    RAISE EXCEPTION 'compass_end_ask does not end an ask as %', kind;
  END IF;
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
  IF kind = 'declined' AND NOT compass_may_answer(stored, actor) THEN
    RETURN jsonb_build_object('status', 'not_named');
  ELSIF kind = 'withdrawn_by_agent' AND (locked.m).author_id <> actor THEN
    RETURN jsonb_build_object('status', 'not_author');
  ELSIF kind = 'withdrawn_by_owner' AND NOT EXISTS (
      SELECT 1 FROM accounts WHERE id = (locked.m).author_id AND owner_id = actor) THEN
    RETURN jsonb_build_object('status', 'not_owner');
  END IF;
  state := compass_ask_standing(stored);
  IF state = kind AND kind <> 'declined' THEN
    RETURN jsonb_build_object('status', 'unchanged', 'ask_message', compass_message_json(
      locked.m, (SELECT handle FROM accounts WHERE id = (locked.m).author_id)));
  END IF;
  IF state <> 'open' THEN
    RETURN jsonb_build_object('status', state);
  END IF;
  IF compass_ask_due(stored) THEN
    RETURN compass_expire_locked(ws, locked.m, locked.idx);
  END IF;
  IF kind = 'declined' AND coalesce((stored ->> 'quorum')::int, 0) > 0 THEN
    voted := compass_voted(stored, actor);
    IF voted IS NOT NULL THEN
      RETURN jsonb_build_object('status', 'voted_' || voted);
    END IF;
    vote := compass_vote(actor, 'decline', NULL, reason, surface, NULL);
    IF coalesce((stored ->> 'declines_count_against_quorum')::boolean, false)
       AND compass_quorum_reachable(stored, 1) THEN
      ask_msg := compass_write_vote(
        locked.m, locked.idx, vote, 'quorum_decline', actor, surface, reason, NULL);
      last_id := compass_append_events_to(ws, ARRAY['message_updated'],
        ARRAY[(locked.m).channel_id], ARRAY[ask_msg]);
      RETURN jsonb_build_object('status', 'recorded', 'ask_message', ask_msg,
        'numbered', last_id IS NOT NULL);
    END IF;
  END IF;
  ask_msg := compass_write_ending(locked.m, locked.idx, kind, actor, surface, reason, NULL, NULL,
    vote);
  change := compass_presence_change((locked.m).author_id, -1);
  last_id := compass_append_ending(ws, (locked.m).channel_id, ask_msg, change);
  RETURN jsonb_build_object('status', 'changed', 'ask_message', ask_msg,
    'numbered', last_id IS NOT NULL);
END
$$;
GRANT CREATE ON SCHEMA public TO compass_writer;
ALTER FUNCTION compass_end_ask(cred bytea, actor uuid, ask text, kind text, surface text, reason text) OWNER TO compass_writer;
REVOKE CREATE ON SCHEMA public FROM compass_writer;
REVOKE ALL ON FUNCTION compass_end_ask(cred bytea, actor uuid, ask text, kind text, surface text, reason text) FROM PUBLIC, compass_app, compass_maintenance;
GRANT EXECUTE ON FUNCTION compass_end_ask(cred bytea, actor uuid, ask text, kind text, surface text, reason text) TO compass_app;
