-- after: 0003

-- Posts a message; its asks that standing answers answer end at once: the post's
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
  proof record;
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
  proof := compass_proof(cred, author);
  ws := proof.ws;
  IF ws IS NULL THEN
    RETURN jsonb_build_object('unscoped', true);
  END IF;
  IF NOT proof.vouched THEN
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
GRANT CREATE ON SCHEMA public TO compass_writer;
ALTER FUNCTION compass_post_message(cred bytea, message_id uuid, channel uuid, author uuid, body jsonb, words text, ask_ids text[], due timestamp with time zone[], surface text) OWNER TO compass_writer;
REVOKE CREATE ON SCHEMA public FROM compass_writer;
REVOKE ALL ON FUNCTION compass_post_message(cred bytea, message_id uuid, channel uuid, author uuid, body jsonb, words text, ask_ids text[], due timestamp with time zone[], surface text) FROM PUBLIC, compass_app, compass_maintenance;
GRANT EXECUTE ON FUNCTION compass_post_message(cred bytea, message_id uuid, channel uuid, author uuid, body jsonb, words text, ask_ids text[], due timestamp with time zone[], surface text) TO compass_app;
