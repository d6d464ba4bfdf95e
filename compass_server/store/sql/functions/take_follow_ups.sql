-- after: 0031

-- Takes up to `batch` due steps, in any workspace, skipping asks another
-- transaction holds. Returns {steps, unnumbered}.
CREATE OR REPLACE FUNCTION compass_take_follow_ups(batch int) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  due record;
  m messages%ROWTYPE;
  idx int;
  stored jsonb;
  nxt record;
  people jsonb;
  step jsonb;
  asked jsonb;
  written messages%ROWTYPE;
  ask_msg jsonb;
  last_id bigint;
  taken int := 0;
  unnumbered uuid[] := '{}';
  target uuid;
  note text;
  reposted messages%ROWTYPE;
  kinds text[];
  channels uuid[];
  payloads jsonb[];
BEGIN
  FOR due IN
    SELECT d.ask_id, d.workspace_id, d.message_id FROM (
      SELECT a.ask_id, a.workspace_id, a.message_id, msg.author_id
      FROM asks a JOIN messages msg ON msg.id = a.message_id
      WHERE a.follow_up_at <= clock_timestamp()
      ORDER BY a.follow_up_at
      LIMIT batch
      FOR UPDATE OF msg SKIP LOCKED
    ) d
    ORDER BY d.author_id, d.ask_id
  LOOP
    SELECT * INTO m FROM messages WHERE id = due.message_id;
    SELECT i - 1 INTO idx FROM jsonb_array_elements(m.blocks) WITH ORDINALITY AS b(block, i)
      WHERE block ->> 'kind' = 'ask' AND block -> 'ask' ->> 'ask_id' = due.ask_id;
    stored := m.blocks -> idx -> 'ask';
    nxt := compass_follow_up_next(stored, m.created_at);
    -- Ended, past its deadline (the expiry ends it), or nothing left: no step.
    IF nxt.due IS NULL OR compass_ask_due(stored) THEN
      UPDATE asks SET follow_up_at = NULL WHERE ask_id = due.ask_id;
      CONTINUE;
    END IF;
    IF nxt.due > clock_timestamp() THEN
      UPDATE asks SET follow_up_at = nxt.due WHERE ask_id = due.ask_id;
      CONTINUE;
    END IF;
    IF nxt.kind = 'escalated' THEN
      -- The people named, and the agent's owner, who aren't answerers yet.
      SELECT coalesce(jsonb_agg(p ORDER BY p), '[]') INTO people FROM (
        SELECT jsonb_array_elements_text(coalesce(stored -> 'follow_up' -> 'escalate_to', '[]')) p
        UNION
        SELECT owner_id::text FROM accounts
          WHERE id = m.author_id AND owner_id IS NOT NULL
            AND coalesce((stored -> 'follow_up' ->> 'escalate_to_owner')::boolean, false)
      ) x
      WHERE p IS NOT NULL AND NOT coalesce(stored -> 'answerer_ids', '[]') ? p;
      -- A note of the ask in another channel, while the asker may post there.
      target := (stored -> 'follow_up' ->> 'escalate_to_channel')::uuid;
      IF target IS NOT NULL AND (
           EXISTS (SELECT 1 FROM channel_members cm
                   WHERE cm.channel_id = target AND cm.account_id = m.author_id)
           OR EXISTS (SELECT 1 FROM compass_participation p
                      WHERE p.channel_id = target AND p.account_id = m.author_id)) THEN
        note := format('Still waiting for an answer in #%s (ask %s): %s',
          (SELECT name FROM channels WHERE id = m.channel_id), due.ask_id,
          stored -> 'questions' -> 0 ->> 'question');
        INSERT INTO messages (id, workspace_id, channel_id, author_id, blocks, search_text)
          VALUES (gen_random_uuid(), due.workspace_id, target, m.author_id,
                  jsonb_build_array(jsonb_build_object('kind', 'text', 'text', note)), lower(note))
          RETURNING * INTO reposted;
      END IF;
    ELSE
      -- The named answerers and the people escalated to who haven't voted.
      SELECT coalesce(jsonb_agg(p ORDER BY p), '[]') INTO people FROM (
        SELECT jsonb_array_elements_text(coalesce(stored -> 'answerer_ids', '[]')) p
        UNION
        SELECT jsonb_array_elements_text(s -> 'account_ids')
          FROM jsonb_array_elements(coalesce(stored -> 'follow_up_steps', '[]')) s
          WHERE s ->> 'kind' = 'escalated'
      ) x
      WHERE p NOT IN (SELECT v ->> 'account_id'
                      FROM jsonb_array_elements(coalesce(stored -> 'quorum_votes', '[]')) v);
    END IF;
    -- At the transaction's time, as its event: readers tell the step an
    -- event recorded by it.
    step := jsonb_build_object('kind', nxt.kind, 'at', now(), 'account_ids', people,
      'urgent', nxt.kind = 'escalated');
    IF reposted.id IS NOT NULL THEN
      step := step || jsonb_build_object('reposted_channel_id', reposted.channel_id,
        'repost_message_id', reposted.id);
    END IF;
    asked := stored || jsonb_build_object('follow_up_steps',
      coalesce(stored -> 'follow_up_steps', '[]') || jsonb_build_array(step));
    UPDATE messages SET blocks = jsonb_set(blocks, ARRAY[idx::text, 'ask'], asked)
      WHERE id = m.id RETURNING * INTO written;
    nxt := compass_follow_up_next(asked, m.created_at);
    UPDATE asks SET follow_up_at = nxt.due WHERE ask_id = due.ask_id;
    IF nxt.due IS NOT NULL THEN
      PERFORM pg_notify('compass_deadlines', extract(epoch FROM nxt.due)::text);
    END IF;
    ask_msg := compass_message_json(written, (SELECT handle FROM accounts WHERE id = m.author_id));
    kinds := ARRAY['message_updated'];
    channels := ARRAY[m.channel_id];
    payloads := ARRAY[ask_msg];
    IF reposted.id IS NOT NULL THEN
      kinds := kinds || 'message_posted'::text;
      channels := channels || reposted.channel_id;
      payloads := payloads
        || compass_message_json(reposted, (SELECT handle FROM accounts WHERE id = m.author_id));
      reposted := NULL;
    END IF;
    last_id := compass_append_events_to(due.workspace_id, kinds, channels, payloads);
    taken := taken + 1;
    IF last_id IS NULL AND NOT due.workspace_id = ANY(unnumbered) THEN
      unnumbered := unnumbered || due.workspace_id;
    END IF;
  END LOOP;
  RETURN jsonb_build_object('steps', taken, 'unnumbered', to_jsonb(unnumbered));
END
$$;
REVOKE ALL ON FUNCTION compass_take_follow_ups(batch integer) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_take_follow_ups(batch integer) TO compass_app, compass_maintenance;
