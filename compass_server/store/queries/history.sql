-- name: check
-- Every entry of one workspace's ask history with whether it holds
-- (migration 0026), then asks with no entry at all.
SELECT id, ask_id, kind, at, holds, last, state_holds FROM compass_history_check(%(ws)s)
