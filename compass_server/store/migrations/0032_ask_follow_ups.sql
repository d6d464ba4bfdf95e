-- Follow-ups: an ask may carry a policy (its block's `follow_up`, written at
-- post: remind_after_s, remind_times, escalate_after_s, escalate_to,
-- escalate_to_owner). Its next step's time is the ask's follow_up_at, set at
-- post and after each step, and claimed like a deadline (0009, 0021): under
-- the ask message's row lock, by whichever server sweeps first, announced on
-- compass_deadlines so every server's loop wakes for it.
--
-- A step is appended to the ask's server-owned `follow_up_steps` ({kind:
-- reminded|escalated, at, account_ids, urgent}) with the ask's
-- message_updated event, so readers, the page and the mail see it. A step
-- is taken only while the ask is open and before its deadline: a step that
-- finds the ask ended (an ending held the lock first) clears the due time
-- and takes nothing. The people an escalation adds may answer or decline
-- as a named answerer may.

ALTER TABLE asks ADD COLUMN follow_up_at timestamptz;
CREATE INDEX asks_follow_up_at ON asks (follow_up_at) WHERE follow_up_at IS NOT NULL;

-- The ask's next step and when it is due, from its policy and its steps so
-- far: a reminder `remind_after` after the post or the last reminder, while
-- fewer than remind_times were sent; the escalation `escalate_after` after the
-- post, once. The escalation goes first when both are due. Nothing at or
-- after the deadline.
CREATE FUNCTION compass_follow_up_next(
  stored jsonb, created timestamptz, OUT kind text, OUT due timestamptz
)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  f jsonb := stored -> 'follow_up';
  steps jsonb := coalesce(stored -> 'follow_up_steps', '[]');
  reminded int;
  last_reminder timestamptz;
  remind_at timestamptz;
  escalate_at timestamptz;
BEGIN
  IF f IS NULL OR compass_ask_standing(stored) <> 'open' THEN
    RETURN;
  END IF;
  SELECT count(*), max((s ->> 'at')::timestamptz) INTO reminded, last_reminder
    FROM jsonb_array_elements(steps) s WHERE s ->> 'kind' = 'reminded';
  IF f ? 'remind_after_s' AND reminded < (f ->> 'remind_times')::int THEN
    remind_at := coalesce(last_reminder, created)
      + make_interval(secs => (f ->> 'remind_after_s')::float8);
  END IF;
  IF f ? 'escalate_after_s'
     AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(steps) s
                     WHERE s ->> 'kind' = 'escalated') THEN
    escalate_at := created + make_interval(secs => (f ->> 'escalate_after_s')::float8);
  END IF;
  IF escalate_at IS NOT NULL AND (remind_at IS NULL OR escalate_at <= remind_at) THEN
    kind := 'escalated';
    due := escalate_at;
  ELSIF remind_at IS NOT NULL THEN
    kind := 'reminded';
    due := remind_at;
  END IF;
  IF stored ? 'deadline' AND due >= (stored ->> 'deadline')::timestamptz THEN
    kind := NULL;
    due := NULL;
  END IF;
END
$$;

-- Each ask's first step is due from its post.
CREATE FUNCTION compass_follow_up_planned() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  m messages%ROWTYPE;
  stored jsonb;
BEGIN
  SELECT * INTO m FROM messages WHERE id = NEW.message_id;
  SELECT b -> 'ask' INTO stored FROM jsonb_array_elements(m.blocks) b
    WHERE b ->> 'kind' = 'ask' AND b -> 'ask' ->> 'ask_id' = NEW.ask_id;
  IF stored ? 'follow_up' THEN
    NEW.follow_up_at := (compass_follow_up_next(stored, m.created_at)).due;
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER asks_follow_up_planned BEFORE INSERT ON asks
  FOR EACH ROW EXECUTE FUNCTION compass_follow_up_planned();

-- A post announces its soonest deadline or first step.
CREATE OR REPLACE FUNCTION compass_deadlines_posted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  soonest timestamptz;
BEGIN
  SELECT least(min(due_at), min(follow_up_at)) INTO soonest FROM posted;
  IF soonest IS NOT NULL THEN
    PERFORM pg_notify('compass_deadlines', extract(epoch FROM soonest)::text);
  END IF;
  RETURN NULL;
END
$$;

-- Takes up to `batch` due steps, in any workspace, skipping asks another
-- transaction holds. Returns {steps, unnumbered}.
CREATE FUNCTION compass_take_follow_ups(batch int) RETURNS jsonb
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
REVOKE ALL ON FUNCTION compass_take_follow_ups(int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_take_follow_ups(int) TO compass_app, compass_maintenance;

CREATE FUNCTION compass_next_follow_up() RETURNS timestamptz
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT min(follow_up_at) FROM asks WHERE follow_up_at IS NOT NULL
$$;
REVOKE ALL ON FUNCTION compass_next_follow_up() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_next_follow_up() TO compass_app, compass_maintenance;

-- The people an escalation added may answer or decline as the named may.
CREATE OR REPLACE FUNCTION compass_may_answer(stored jsonb, actor uuid) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT NOT (stored ? 'answerer_ids') OR (stored -> 'answerer_ids') ? actor::text
    OR EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(stored -> 'follow_up_steps', '[]')) s
               WHERE s ->> 'kind' = 'escalated' AND (s -> 'account_ids') ? actor::text)
$$;

-- The content check of 0025, with follow_up_steps server-owned and
-- append-only like quorum_votes.
CREATE OR REPLACE FUNCTION compass_message_kept() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  i int;
  o jsonb;
  n jsonb;
  q int;
  kept int;
  list text;
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
       OR (o -> 'ask') - '{answered,cancelled,ending,questions,quorum_votes,follow_up_steps}'::text[]
          <> (n -> 'ask') - '{answered,cancelled,ending,questions,quorum_votes,follow_up_steps}'::text[]
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
    FOREACH list IN ARRAY ARRAY['quorum_votes', 'follow_up_steps'] LOOP
      kept := jsonb_array_length(coalesce(o -> 'ask' -> list, '[]'));
      IF jsonb_array_length(coalesce(n -> 'ask' -> list, '[]')) < kept
         OR (kept > 0 AND (
               SELECT jsonb_agg(v ORDER BY x.k)
               FROM jsonb_array_elements(n -> 'ask' -> list) WITH ORDINALITY AS x (v, k)
               WHERE x.k <= kept) <> o -> 'ask' -> list)
      THEN
        RAISE EXCEPTION 'message %: a vote or follow-up step of an ask is final', OLD.id
          USING ERRCODE = 'check_violation';
      END IF;
    END LOOP;
  END LOOP;
  RETURN NULL;
END
$$;

-- What an endpoint is owed (0025's count), with a follow-up step of an open
-- ask (ask.reminded, ask.escalated) among the updates that make a delivery.
-- A quorum ask's update is counted as its vote.
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
            CASE WHEN b -> 'ask' ? 'quorum_votes' THEN 'ask.voted'
                 WHEN b -> 'ask' ? 'follow_up_steps'
                   THEN 'ask.' || (b -> 'ask' -> 'follow_up_steps' -> -1 ->> 'kind')
            END
          ELSE CASE b -> 'ask' -> 'ending' ->> 'kind'
            WHEN 'answered' THEN 'ask.answered'
            WHEN 'declined' THEN 'ask.declined'
            WHEN 'expired' THEN 'ask.expired'
            ELSE 'ask.withdrawn' END
          END = ANY (types))
        AND (b -> 'ask' ? 'ending' OR b -> 'ask' ? 'quorum_votes'
             OR b -> 'ask' ? 'follow_up_steps'))
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
