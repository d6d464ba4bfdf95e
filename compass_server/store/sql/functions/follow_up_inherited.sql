-- after: 0035

CREATE OR REPLACE FUNCTION compass_follow_up_inherited() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  inherited jsonb;
  written jsonb := '[]';
  b jsonb;
  a jsonb;
  f jsonb;
BEGIN
  SELECT coalesce(c.follow_up_default, w.follow_up_default) INTO inherited
    FROM channels c JOIN workspaces w ON w.id = c.workspace_id
    WHERE c.id = NEW.channel_id;
  FOR b IN SELECT x FROM jsonb_array_elements(NEW.blocks) WITH ORDINALITY AS t(x, i) ORDER BY i
  LOOP
    IF b ->> 'kind' = 'ask' AND b -> 'ask' ? 'follow_up_inherit' THEN
      a := (b -> 'ask') - 'follow_up_inherit';
      IF inherited IS NOT NULL THEN
        f := inherited;
        IF coalesce((a ->> 'quorum')::int, 0) > 0 THEN
          f := f - '{escalate_after_s,escalate_to,escalate_to_owner,escalate_to_channel}'::text[];
        END IF;
        IF f ? 'remind_after_s' OR f ? 'escalate_after_s' THEN
          a := a || jsonb_build_object('follow_up', f);
        ELSE
          a := a - 'follow_up';
        END IF;
      END IF;
      b := b || jsonb_build_object('ask', a);
    END IF;
    written := written || jsonb_build_array(b);
  END LOOP;
  NEW.blocks := written;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION compass_follow_up_inherited() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_follow_up_inherited() TO PUBLIC;
