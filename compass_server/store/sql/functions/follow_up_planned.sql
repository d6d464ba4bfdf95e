-- after: 0031

-- Each ask's first step is due from its post.
CREATE OR REPLACE FUNCTION compass_follow_up_planned() RETURNS trigger
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
REVOKE ALL ON FUNCTION compass_follow_up_planned() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_follow_up_planned() TO PUBLIC;
