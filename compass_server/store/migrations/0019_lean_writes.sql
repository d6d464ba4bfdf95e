-- Leaner hot writes: the same outcomes for less PostgreSQL work per call.
--
-- 1. The row-level security of participation (0017) ran on top of the write
-- functions' own checks: every INSERT, UPDATE and locking read of a message
-- asked again, up to twice per statement, whether the actor took part in the
-- channel (each time proving the actor from its credential and the
-- workspace of every table the view reads). The three hot writes now run as
-- compass_writer, a role that owns nothing and nothing logs in as: the
-- workspace's policy holds it as it holds compass_app, the participation
-- policies don't, and each function checks what they checked, once: that
-- its credential vouches for the account it acts as, and that the account
-- takes part in the channel. Every other statement of compass_app is held
-- by the policies as before.
--
-- 2. Under compass_writer the workspace's policy reads the workspace the
-- function proved from its credential at entry (compass.writer_workspace),
-- instead of proving it again for every table of every statement. Only
-- those functions run as compass_writer, and each names the workspace
-- before its first read; compass_app naming one changes nothing (its
-- statements still prove theirs), as compass.operator_workspace is heard
-- only from compass_maintenance.
--
-- 3. Participation (compass_participation's definition) costs one index
-- probe when the account is a member of the channel itself, and reads its
-- chain only otherwise. Written out where it is asked: a SQL function with a
-- subquery is never inlined, so it would be planned again on every call.
--
-- 4. A presence change updates the agent's row once.


GRANT SELECT, INSERT, UPDATE ON messages, asks, events TO compass_writer;
GRANT SELECT, UPDATE ON accounts, event_counters TO compass_writer;
GRANT INSERT ON ask_history TO compass_writer;
GRANT SELECT ON channel_members, inbox_items, agent_sessions, compass_participation
  TO compass_writer;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO compass_writer;

