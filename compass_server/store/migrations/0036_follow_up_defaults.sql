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
