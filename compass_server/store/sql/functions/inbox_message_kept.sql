-- after: 0020

CREATE OR REPLACE FUNCTION compass_inbox_message_kept() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF (NEW.id, NEW.position, NEW.workspace_id, NEW.item_id, NEW.author_id, NEW.blocks, NEW.ask_id,
      NEW.answers_message_id, NEW.client_key, NEW.created_at)
     IS DISTINCT FROM (OLD.id, OLD.position, OLD.workspace_id, OLD.item_id, OLD.author_id,
      OLD.blocks, OLD.ask_id, OLD.answers_message_id, OLD.client_key, OLD.created_at)
  THEN
    RAISE EXCEPTION 'inbox message %: an ask''s content never changes after its post', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION compass_inbox_message_kept() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_inbox_message_kept() TO PUBLIC;
