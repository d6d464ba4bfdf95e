-- Asks that need several people, and standing answers.
--
-- 1. A quorum ask names its answerers and needs K of them (`quorum` in the
-- ask's JSON, client-owned and immutable like the rest of its content).
-- Each named person's part is a vote, appended to the ask's server-owned
-- `quorum_votes` under the message's row lock, with a history entry
-- ('quorum_answer' or 'quorum_decline') in the same transaction: the ask's
-- JSON is what every reader and every event already carries, so a vote is
-- visible to the others wherever the ask shows, and the history's unique
-- index on (ask, person) makes a vote final for its person whatever code
-- writes it. The K-th answer is the ending: it writes its own vote and the
-- ending together, and posts the one ask_answer message carrying all K
-- answers. A decline ends the ask (its vote kept), unless the ask says
-- declines count against the quorum: then it is a vote, and the ask ends
-- declined only when K answers can no longer be reached. Withdraws and
-- expiry end a quorum ask as any other, its votes kept. Every vote, like
-- every ending, holds the row at or before the deadline (0021).
--
-- 2. A standing answer is a person's rule, made with an answer: later asks
-- of that agent (or of the agents below it) whose every question is one of
-- the rule's (the same text, header, options and multiplicity) are
-- answered at their post, in the post's transaction, for that person,
-- attributed to the rule (surface 'standing_answer'). An ask that names its
-- answerers takes only their rules; a quorum ask counts a rule as its
-- person's vote. The post locks each rule it uses (FOR SHARE) and checks it
-- again under the lock, by the clock then, and a revoke updates the rule's
-- row: a revoke waits for a post that took the rule, and a post for a
-- revoke under way, which it then sees. So once a revoke commits, or a rule
-- expires, it answers nothing.

-- --- the record -------------------------------------------------------------------

CREATE TABLE standing_answers (
  id uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  -- The person it answers for.
  account_id uuid NOT NULL,
  -- The agent whose asks it answers, and with include_subagents the agents below it.
  agent_id uuid NOT NULL,
  include_subagents boolean NOT NULL DEFAULT false,
  -- The answered questions of the ask it was made with, as stored there.
  questions jsonb NOT NULL,
  made_from_ask_id text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz,
  UNIQUE (workspace_id, id),
  FOREIGN KEY (workspace_id, account_id) REFERENCES accounts (workspace_id, id),
  FOREIGN KEY (workspace_id, agent_id) REFERENCES accounts (workspace_id, id),
  FOREIGN KEY (workspace_id, made_from_ask_id) REFERENCES asks (workspace_id, ask_id),
  CHECK (expires_at > created_at)
);
CREATE INDEX standing_answers_agent ON standing_answers (agent_id) WHERE revoked_at IS NULL;
CREATE INDEX standing_answers_account ON standing_answers (account_id, created_at DESC);
CREATE INDEX standing_answers_workspace ON standing_answers (workspace_id, created_at DESC);
ALTER TABLE standing_answers ENABLE ROW LEVEL SECURITY;
CREATE POLICY workspace_only ON standing_answers TO compass_app, compass_maintenance, compass_writer
  USING (workspace_id = (SELECT compass_workspace()))
  WITH CHECK (workspace_id = (SELECT compass_workspace()));
REVOKE ALL ON standing_answers FROM compass_app;
GRANT SELECT, UPDATE (revoked_at) ON standing_answers TO compass_app;
GRANT SELECT ON standing_answers TO compass_maintenance;
-- UPDATE on a column is what a row lock (FOR SHARE) asks for.
GRANT SELECT, INSERT, UPDATE (revoked_at) ON standing_answers TO compass_writer;

ALTER TABLE ask_history DROP CONSTRAINT ask_history_kind_check;
ALTER TABLE ask_history ADD CONSTRAINT ask_history_kind_check CHECK (kind IN (
  'posted', 'answered', 'withdrawn_by_agent', 'withdrawn_by_owner', 'declined', 'expired',
  'quorum_answer', 'quorum_decline'));
ALTER TABLE ask_history DROP CONSTRAINT ask_history_surface_check;
ALTER TABLE ask_history ADD CONSTRAINT ask_history_surface_check CHECK (surface IN (
  'grpc', 'connect', 'relay', 'web', 'inbox', 'server', 'standing_answer'));
ALTER TABLE ask_history
  ADD COLUMN standing_answer_id uuid,
  ADD CONSTRAINT ask_history_standing_answer_id_fkey
    FOREIGN KEY (workspace_id, standing_answer_id) REFERENCES standing_answers (workspace_id, id),
  ADD CONSTRAINT ask_history_standing_surface
    CHECK ((standing_answer_id IS NULL) = (surface IS DISTINCT FROM 'standing_answer'));
-- An ask still ends once; a person votes once.
DROP INDEX ask_history_one_ending;
CREATE UNIQUE INDEX ask_history_one_ending ON ask_history (ask_id)
  WHERE kind NOT IN ('posted', 'quorum_answer', 'quorum_decline');
CREATE UNIQUE INDEX ask_history_one_vote ON ask_history (ask_id, actor_id)
  WHERE kind IN ('quorum_answer', 'quorum_decline');
CREATE INDEX ask_history_standing ON ask_history (standing_answer_id)
  WHERE standing_answer_id IS NOT NULL;

-- How many asks each of these standing answers answered (or voted in).
-- Counted as the owner: a person's or an admin's listing counts asks in
-- channels they may not read.
CREATE FUNCTION compass_standing_uses(ids uuid[])
RETURNS TABLE (standing_answer_id uuid, uses bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT h.standing_answer_id, count(*) FROM ask_history h
  WHERE h.standing_answer_id = ANY (ids)
  GROUP BY h.standing_answer_id
$$;
REVOKE ALL ON FUNCTION compass_standing_uses(uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_standing_uses(uuid[]) TO compass_app, compass_maintenance;

-- --- votes --------------------------------------------------------------------------

-- A named person's vote: {account_id, handle, kind: answer | decline,
-- answers: [{question_id, chosen_option_ids, custom_text}], reason, at,
-- surface, standing_answer_id}, absent keys for empty values.
CREATE FUNCTION compass_vote(
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

-- 'answer' or 'decline' when the person already voted in the ask; NULL otherwise.
CREATE FUNCTION compass_voted(stored jsonb, actor uuid) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT v ->> 'kind' FROM jsonb_array_elements(coalesce(stored -> 'quorum_votes', '[]')) v
  WHERE v ->> 'account_id' = actor::text
  LIMIT 1
$$;

-- Whether a quorum ask can still reach its quorum with `more` declines
-- besides those voted: its answers and the named people yet to vote.
CREATE FUNCTION compass_quorum_reachable(stored jsonb, more int) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_array_length(stored -> 'answerer_ids')
         - count(*) FILTER (WHERE v ->> 'kind' = 'decline') - more
         >= (stored ->> 'quorum')::int
  FROM jsonb_array_elements(coalesce(stored -> 'quorum_votes', '[]')) v
$$;

-- Writes a vote that doesn't end the ask (a locked, open one): appended to
-- its votes, with its history entry. Returns the ask's message.
CREATE FUNCTION compass_write_vote(
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

-- The ending of 0021, which may also be a rule's (`rule`, recorded in the
-- ending and its history entry) and may append the vote that made it.
DROP FUNCTION compass_write_ending(messages, int, text, uuid, text, text, jsonb);
CREATE FUNCTION compass_write_ending(
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

-- A person's answer to a locked, open ask that lets them answer, before its
-- deadline, by them or by their rule (`rule`): the ending of a plain ask,
-- or of a quorum ask at its K-th answer, with the ask_answer message (a
-- quorum's carries every answer); otherwise the vote alone. Returns
-- {status: taken, ask_message, answer_message}, {status: recorded,
-- ask_message}, or {status: voted_answer | voted_decline} for a person who
-- already voted. Appends no events and moves no presence: its callers do.
CREATE FUNCTION compass_take_answer(
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

-- --- standing answers ---------------------------------------------------------------

-- A question as a standing answer matches it: its content without its id,
-- its recommendation or any answer state.
CREATE FUNCTION compass_question_key(q jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT q - '{question_id,recommended,chosen_option_ids,custom_text,timed_out}'::text[]
$$;

-- The rule an answer asked for (`terms`: {id, seconds, include_subagents,
-- most}), made for the person answering the locked ask `m`. Returns
-- {standing_answer_id, created_at, expires_at}, or {status} when it can't be
-- made: the ask is not an agent's, or the person has `most` rules in force.
CREATE FUNCTION compass_make_standing(
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

-- The rules that may answer a newly posted ask of `author` (whose chain is
-- `author_chain`) in `channel`, each with the ask's questions answered its
-- way: rules in force for the author, or for an agent above it that
-- include its sub-agents, of active people the ask lets answer (those it
-- names, else the channel's members), that answer every one of its
-- questions. A named person's come in the order the ask names them, newest
-- first; checked again under each rule's lock before one is used.
CREATE FUNCTION compass_standing_candidates(
  stored jsonb, author uuid, author_chain uuid[], channel uuid
) RETURNS TABLE (rule_id uuid, person uuid, answered jsonb)
LANGUAGE sql VOLATILE AS $$
  SELECT s.id, s.account_id, a.answered
  FROM standing_answers s
  JOIN accounts p ON p.id = s.account_id AND p.kind = 'human' AND p.deactivated_at IS NULL
  CROSS JOIN LATERAL (
    SELECT jsonb_agg(x.q || found.answer ORDER BY x.i) AS answered,
           count(found.answer) AS matched, count(*) AS asked
    FROM jsonb_array_elements(stored -> 'questions') WITH ORDINALITY AS x (q, i)
    LEFT JOIN LATERAL (
      SELECT jsonb_strip_nulls(jsonb_build_object(
               'chosen_option_ids', e -> 'chosen_option_ids', 'custom_text', e -> 'custom_text'))
               AS answer
      FROM jsonb_array_elements(s.questions) AS e
      WHERE compass_question_key(e) = compass_question_key(x.q)
      LIMIT 1
    ) found ON true
  ) a
  LEFT JOIN LATERAL (
    SELECT y.n FROM jsonb_array_elements_text(stored -> 'answerer_ids') WITH ORDINALITY AS y (id, n)
    WHERE y.id = s.account_id::text
  ) named ON true
  WHERE s.agent_id = ANY (author_chain)
    AND (s.agent_id = author OR s.include_subagents)
    AND s.revoked_at IS NULL
    AND s.expires_at > clock_timestamp()
    AND a.matched = a.asked
    AND CASE WHEN stored ? 'answerer_ids' THEN named.n IS NOT NULL
             ELSE EXISTS (SELECT 1 FROM channel_members cm
                          WHERE cm.channel_id = channel AND cm.account_id = s.account_id) END
  ORDER BY named.n NULLS LAST, s.created_at DESC, s.id
$$;

-- The post of 0019, whose asks standing answers answer at once: the post's
-- MessagePosted carries the message as posted; each rule used appends the
-- ask's MessageUpdated (and, at an ending, the answer's MessagePosted); the
-- agent goes WAITING only for the asks left open; and the post returns the
-- message as it stands at commit.
CREATE OR REPLACE FUNCTION compass_post_message(
  cred bytea, message_id uuid, channel uuid, author uuid, body jsonb, words text, ask_ids text[],
  due timestamptz[], surface text
) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
  ws uuid;
  last_id bigint;
  m messages%ROWTYPE;
  msg jsonb;
  change jsonb;
  kinds text[] := ARRAY['message_posted'];
  channels uuid[] := ARRAY[channel];
  payloads jsonb[];
  author_chain uuid[];
  posted_ask text;
  idx int;
  rule record;
  taken jsonb;
  answered_now int := 0;
BEGIN
  ws := compass_writer_scope(cred, author);
  IF ws IS NULL THEN
    RETURN jsonb_build_object('unscoped', true);
  END IF;
  IF NOT compass_vouched(author) THEN
    RETURN NULL;
  END IF;
  -- The author's row: a move of the author or of an agent above it rewrites
  -- it, so the post waits for the move (and then reads the new chain) or the
  -- move for the post. An ask's post takes the lock its count's update needs.
  IF cardinality(ask_ids) > 0 THEN
    SELECT a.chain INTO author_chain FROM accounts a WHERE a.id = author FOR NO KEY UPDATE;
  ELSE
    PERFORM 1 FROM accounts WHERE id = author FOR SHARE;
  END IF;
  INSERT INTO messages (id, workspace_id, channel_id, author_id, blocks, search_text)
    SELECT message_id, ws, channel, author, body, words
    WHERE EXISTS (SELECT 1 FROM channel_members cm
                  WHERE cm.channel_id = channel AND cm.account_id = author)
       OR EXISTS (SELECT 1 FROM compass_participation p
                  WHERE p.account_id = author AND p.channel_id = channel)
    RETURNING * INTO m;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  msg := compass_message_json(m, (SELECT handle FROM accounts WHERE id = author));
  payloads := ARRAY[msg];
  IF cardinality(ask_ids) > 0 THEN
    INSERT INTO asks (ask_id, workspace_id, message_id, due_at)
      SELECT a, ws, message_id, d FROM unnest(ask_ids, due) AS x(a, d);
    INSERT INTO ask_history (workspace_id, ask_id, kind, actor_id, surface)
      SELECT ws, a, 'posted', author, surface FROM unnest(ask_ids) AS a;
    -- One probe when no rule stands for the author's chain.
    IF EXISTS (SELECT 1 FROM standing_answers s
               WHERE s.agent_id = ANY (author_chain) AND s.revoked_at IS NULL) THEN
      FOREACH posted_ask IN ARRAY ask_ids LOOP
        SELECT i - 1 INTO idx FROM jsonb_array_elements(m.blocks) WITH ORDINALITY AS b(block, i)
          WHERE block ->> 'kind' = 'ask' AND block -> 'ask' ->> 'ask_id' = posted_ask;
        FOR rule IN
          SELECT * FROM compass_standing_candidates(
            m.blocks -> idx -> 'ask', author, author_chain, channel)
        LOOP
          PERFORM 1 FROM standing_answers s
            WHERE s.id = rule.rule_id AND s.revoked_at IS NULL
              AND s.expires_at > clock_timestamp()
            FOR SHARE;
          CONTINUE WHEN NOT FOUND;
          SELECT * INTO m FROM messages WHERE id = message_id;
          taken := compass_take_answer(ws, m, idx, rule.person, rule.answered, gen_random_uuid(),
            'standing_answer', rule.rule_id);
          CONTINUE WHEN taken ->> 'status' NOT IN ('taken', 'recorded');
          msg := taken -> 'ask_message';
          kinds := kinds || 'message_updated'::text;
          channels := channels || channel;
          payloads := payloads || msg;
          IF taken ->> 'status' = 'taken' THEN
            kinds := kinds || 'message_posted'::text;
            channels := channels || channel;
            payloads := payloads || (taken -> 'answer_message');
            answered_now := answered_now + 1;
            EXIT;
          END IF;
        END LOOP;
      END LOOP;
    END IF;
    change := compass_presence_change(author, cardinality(ask_ids) - answered_now);
  END IF;
  IF change IS NOT NULL THEN
    kinds := kinds || 'presence_changed'::text;
    channels := channels || NULL::uuid;
    payloads := payloads || change;
  END IF;
  last_id := compass_append_events_to(ws, kinds, channels, payloads);
  RETURN jsonb_build_object('message', msg, 'numbered', last_id IS NOT NULL);
END
$$;

-- --- the answer and the other endings -----------------------------------------------

-- The answer of 0021, through compass_take_answer: a quorum ask's answer
-- short of its quorum is a vote (its MessageUpdated alone: the agent hears
-- nothing until the ending). `standing` ({id, seconds, include_subagents,
-- most}, or NULL) makes the answer a standing answer in the same
-- transaction.
DROP FUNCTION compass_answer_ask(bytea, uuid, text, jsonb, uuid, text);
CREATE FUNCTION compass_answer_ask(
  cred bytea, actor uuid, ask text, answered jsonb, answer_id uuid, surface text, standing jsonb
) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
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
  ws := compass_writer_scope(cred, actor);
  IF ws IS NULL THEN
    RETURN jsonb_build_object('status', 'unscoped');
  END IF;
  IF NOT compass_vouched(actor) THEN
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

-- The other endings of 0021. A named person's decline of a quorum ask is a
-- vote; it ends the ask declined unless the ask counts declines against the
-- quorum and the quorum can still be reached.
CREATE OR REPLACE FUNCTION compass_end_ask(
  cred bytea, actor uuid, ask text, kind text, surface text, reason text
) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
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
  ws := compass_writer_scope(cred, actor);
  IF ws IS NULL THEN
    RETURN jsonb_build_object('status', 'unscoped');
  END IF;
  IF NOT compass_vouched(actor) THEN
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

-- The coalesced endings of 0020, passing an answer's `standing`.
CREATE OR REPLACE FUNCTION compass_end_asks(items jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  n int := jsonb_array_length(items);
  results jsonb[] := array_fill(NULL::jsonb, ARRAY[n]);
  askers uuid[] := array_fill(NULL::uuid, ARRAY[n]);
  it record;
  cred bytea;
  actor uuid;
BEGIN
  -- Every message first, in ask id order.
  FOR it IN
    SELECT x.item, x.n FROM jsonb_array_elements(items) WITH ORDINALITY AS x (item, n)
    ORDER BY x.item ->> 'ask_id', x.n
  LOOP
    askers[it.n] := compass_lock_ask_for(
      decode(it.item ->> 'cred', 'hex'), (it.item ->> 'actor')::uuid, it.item ->> 'ask_id');
  END LOOP;
  -- Then the endings, in the order of the agents' rows they update.
  FOR it IN
    SELECT x.item, x.n FROM jsonb_array_elements(items) WITH ORDINALITY AS x (item, n)
    ORDER BY askers[x.n], x.item ->> 'ask_id', x.n
  LOOP
    cred := decode(it.item ->> 'cred', 'hex');
    actor := (it.item ->> 'actor')::uuid;
    IF it.item ? 'answered' THEN
      results[it.n] := compass_answer_ask(cred, actor, it.item ->> 'ask_id', it.item -> 'answered',
        (it.item ->> 'answer_id')::uuid, it.item ->> 'surface',
        nullif(it.item -> 'standing', 'null'::jsonb));
    ELSE
      results[it.n] := compass_end_ask(cred, actor, it.item ->> 'ask_id', it.item ->> 'kind',
        it.item ->> 'surface', it.item ->> 'reason');
    END IF;
  END LOOP;
  RETURN to_jsonb(results);
END
$$;

GRANT CREATE ON SCHEMA public TO compass_writer;
ALTER FUNCTION compass_answer_ask(bytea, uuid, text, jsonb, uuid, text, jsonb)
  OWNER TO compass_writer;
REVOKE CREATE ON SCHEMA public FROM compass_writer;
REVOKE ALL ON FUNCTION compass_answer_ask(bytea, uuid, text, jsonb, uuid, text, jsonb)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_answer_ask(bytea, uuid, text, jsonb, uuid, text, jsonb)
  TO compass_app;

-- --- what a message may change ------------------------------------------------------

-- The check of 0021, with a quorum ask's votes server-owned too: while the
-- ask is open they only grow, each vote kept as it was written.
CREATE OR REPLACE FUNCTION compass_message_kept() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  i int;
  o jsonb;
  n jsonb;
  q int;
  kept int;
BEGIN
  IF (NEW.id, NEW.workspace_id, NEW.channel_id, NEW.author_id, NEW.created_at, NEW.position,
      NEW.search_text)
     IS DISTINCT FROM (OLD.id, OLD.workspace_id, OLD.channel_id, OLD.author_id, OLD.created_at,
      OLD.position, OLD.search_text)
     OR jsonb_array_length(NEW.blocks) <> jsonb_array_length(OLD.blocks)
  THEN
    RAISE EXCEPTION 'message %: an ask''s content never changes after its post', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  FOR i IN 0 .. jsonb_array_length(OLD.blocks) - 1 LOOP
    o := OLD.blocks -> i;
    n := NEW.blocks -> i;
    CONTINUE WHEN o = n;
    IF o ->> 'kind' <> 'ask' OR n ->> 'kind' IS DISTINCT FROM 'ask'
       OR (o -> 'ask') - '{answered,cancelled,ending,questions,quorum_votes}'::text[]
          <> (n -> 'ask') - '{answered,cancelled,ending,questions,quorum_votes}'::text[]
       OR jsonb_array_length(o -> 'ask' -> 'questions')
          IS DISTINCT FROM jsonb_array_length(n -> 'ask' -> 'questions')
    THEN
      RAISE EXCEPTION 'message %: an ask''s content never changes after its post', OLD.id
        USING ERRCODE = 'check_violation';
    END IF;
    FOR q IN 0 .. jsonb_array_length(o -> 'ask' -> 'questions') - 1 LOOP
      IF (o -> 'ask' -> 'questions' -> q) - '{chosen_option_ids,custom_text,timed_out}'::text[]
         <> (n -> 'ask' -> 'questions' -> q) - '{chosen_option_ids,custom_text,timed_out}'::text[]
      THEN
        RAISE EXCEPTION 'message %: an ask''s content never changes after its post', OLD.id
          USING ERRCODE = 'check_violation';
      END IF;
    END LOOP;
    IF compass_ask_standing(o -> 'ask') <> 'open' THEN
      RAISE EXCEPTION 'message %: an ask that ended stays as it ended', OLD.id
        USING ERRCODE = 'check_violation';
    END IF;
    kept := jsonb_array_length(coalesce(o -> 'ask' -> 'quorum_votes', '[]'));
    IF jsonb_array_length(coalesce(n -> 'ask' -> 'quorum_votes', '[]')) < kept
       OR (kept > 0 AND (
             SELECT jsonb_agg(v ORDER BY x.k)
             FROM jsonb_array_elements(n -> 'ask' -> 'quorum_votes') WITH ORDINALITY AS x (v, k)
             WHERE x.k <= kept) <> o -> 'ask' -> 'quorum_votes')
    THEN
      RAISE EXCEPTION 'message %: a vote in a quorum ask is final', OLD.id
        USING ERRCODE = 'check_violation';
    END IF;
  END LOOP;
  RETURN NULL;
END
$$;

-- --- what webhook endpoints are owed ------------------------------------------------

-- The count of 0021, with a vote in a quorum ask (an update of a message
-- whose ask is still open: only a vote updates one) making an ask.voted.
CREATE OR REPLACE FUNCTION compass_webhook_owed(kind text, payload jsonb, types text[])
RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE kind
    WHEN 'message_posted' THEN (
      SELECT count(*)::integer FROM jsonb_array_elements(payload -> 'blocks') b
      WHERE b ->> 'kind' = 'ask' AND (cardinality(types) = 0 OR 'ask.posted' = ANY (types)))
    WHEN 'message_updated' THEN (
      SELECT least(count(*), 1)::integer FROM jsonb_array_elements(payload -> 'blocks') b
      WHERE b ->> 'kind' = 'ask'
        AND (cardinality(types) = 0 OR CASE
          WHEN NOT b -> 'ask' ? 'ending' THEN
            CASE WHEN b -> 'ask' ? 'quorum_votes' THEN 'ask.voted' END
          ELSE CASE b -> 'ask' -> 'ending' ->> 'kind'
            WHEN 'answered' THEN 'ask.answered'
            WHEN 'declined' THEN 'ask.declined'
            WHEN 'expired' THEN 'ask.expired'
            ELSE 'ask.withdrawn' END
          END = ANY (types))
        AND (b -> 'ask' ? 'ending' OR b -> 'ask' ? 'quorum_votes'))
    WHEN 'inbox_item_changed' THEN (
      SELECT CASE WHEN cardinality(types) > 0 AND NOT ('inbox.item.' || status) = ANY (types)
                  THEN 0
                  WHEN status = 'open' AND (message IS NULL OR asks) THEN 1
                  WHEN status = 'answered' AND answers THEN 1
                  WHEN status = 'closed' AND (message IS NULL OR asks) THEN 1
                  ELSE 0 END
      FROM (SELECT payload ->> 'status' AS status,
                   nullif(payload -> 'message', 'null') AS message,
                   coalesce(payload -> 'message' -> 'blocks' @> '[{"kind": "ask"}]', false) AS asks,
                   coalesce(payload -> 'message' -> 'blocks' @> '[{"kind": "ask_answer"}]', false)
                     AS answers) AS change)
    ELSE 0
  END
$$;
