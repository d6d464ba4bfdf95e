-- Follow-up defaults per workspace and per channel. An ask posted without a
-- policy takes its channel's default, else its workspace's, else the
-- server's setting; an ask's own policy (an empty one: none) wins.
--
-- A default is stored as an ask's `follow_up` is (0032: remind_after_s,
-- remind_times, escalate_after_s, escalate_to_owner); '{}' is "no
-- follow-ups", NULL "none of its own". A default names no people or
-- channel (the server checks it when set).
--
-- The server marks each ask sent without a policy `follow_up_inherit` (and
-- gives it the server's default); at the insert this trigger replaces that
-- with the channel's or the workspace's default, read in the post's own
-- transaction, and drops the mark. A quorum ask keeps only the reminders.
--
-- Who created a channel is kept: they may set its default, as may an admin.

ALTER TABLE workspaces ADD COLUMN follow_up_default jsonb
  CHECK (jsonb_typeof(follow_up_default) = 'object');
ALTER TABLE channels
  ADD COLUMN follow_up_default jsonb CHECK (jsonb_typeof(follow_up_default) = 'object'),
  ADD COLUMN created_by uuid REFERENCES accounts (id);

GRANT UPDATE (follow_up_default) ON workspaces TO compass_app;
GRANT UPDATE (follow_up_default) ON channels TO compass_maintenance;

CREATE FUNCTION compass_follow_up_inherited() RETURNS trigger
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
CREATE TRIGGER messages_follow_up_inherited BEFORE INSERT ON messages
  FOR EACH ROW WHEN (NEW.blocks @> '[{"kind": "ask", "ask": {"follow_up_inherit": true}}]')
  EXECUTE FUNCTION compass_follow_up_inherited();

-- For the operator's command line: the workspace a channel belongs to.
CREATE FUNCTION compass_channel_workspace(channel uuid) RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT workspace_id FROM channels WHERE id = channel
$$;
REVOKE ALL ON FUNCTION compass_channel_workspace(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_channel_workspace(uuid) TO compass_maintenance;
