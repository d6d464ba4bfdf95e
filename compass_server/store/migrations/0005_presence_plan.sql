-- The WAITING check must always read its partial index (messages_open_asks):
-- the planner's default selectivity for jsonb_path_exists makes it choose a
-- scan of every message once the table is large (743 ms at 10^6 rows against
-- 0.1 ms through the index).
ALTER FUNCTION compass_presence_change(uuid) SET enable_seqscan = off;
