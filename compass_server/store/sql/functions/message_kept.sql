-- after: 0020

-- Nothing rewrites a message after its post but its asks' server-owned
-- state (answered, cancelled, ending, each question's answer), and an ask
-- that ended stays as it ended; quorum_votes and follow_up_steps only grow.
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
REVOKE ALL ON FUNCTION compass_message_kept() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_message_kept() TO PUBLIC;
