-- name: insert_channel
-- No RETURNING nor ON CONFLICT (which read the row back): its creator takes
-- part in it only once a member, and row-level security hides it till then.
INSERT INTO channels (id, workspace_id, name, topic, kind, dm_key, created_by)
VALUES (%(id)s, compass_workspace(), %(name)s, %(topic)s, %(kind)s, %(dm_key)s, %(created_by)s)

-- name: lock_dm
-- Serialises the opening of one pair's DM: the second opener finds the
-- first's (in its next statement, which sees what committed meanwhile).
SELECT pg_advisory_xact_lock(hashtextextended('compass.dm:' || %(dm_key)s, 0))

-- name: channel_by_dm_key
SELECT id FROM channels WHERE dm_key = %(dm_key)s

-- name: add_member
INSERT INTO channel_members (channel_id, account_id, workspace_id)
VALUES (%(channel_id)s, %(account_id)s, compass_workspace())
ON CONFLICT DO NOTHING
RETURNING account_id

-- name: accounts_exist
SELECT id FROM accounts WHERE id = ANY(%(ids)s::uuid[])

-- name: get_channel_as_member
-- The channel, if the actor takes part in it; its members in join order.
SELECT c.id, c.name, c.topic, c.kind, c.created_at,
       array(SELECT cm.account_id FROM channel_members cm
             WHERE cm.channel_id = c.id ORDER BY cm.joined_at, cm.account_id) AS member_ids
FROM channels c
WHERE c.id = %(id)s
  AND EXISTS (SELECT 1 FROM compass_participation p
              WHERE p.account_id = %(actor)s AND p.channel_id = c.id)

-- name: lock_channel_as_member
SELECT c.id, c.kind FROM channels c
WHERE c.id = %(id)s
  AND EXISTS (SELECT 1 FROM compass_participation p
              WHERE p.account_id = %(actor)s AND p.channel_id = c.id)
FOR UPDATE OF c

-- name: list_channels
SELECT c.id, c.name, c.topic, c.kind, c.created_at,
       array(SELECT cm.account_id FROM channel_members cm
             WHERE cm.channel_id = c.id ORDER BY cm.joined_at, cm.account_id) AS member_ids
FROM channels c
WHERE (c.created_at, c.id) > (%(after_created)s, %(after_id)s)
  AND EXISTS (SELECT 1 FROM compass_participation p
              WHERE p.account_id = %(actor)s AND p.channel_id = c.id)
ORDER BY c.created_at, c.id
LIMIT %(limit)s

-- name: update_topic
UPDATE channels SET topic = %(topic)s WHERE id = %(id)s

-- name: participation
-- The actor's chain, with every channel it takes part in and since when (one
-- row with no channel when it takes part in none).
SELECT a.chain, p.channel_id, p.since
FROM accounts a LEFT JOIN compass_participation_of(a.id) p ON true
WHERE a.id = %(actor)s

-- name: lock_memberships
-- Serialises joins of these accounts, in one order so that two never wait
-- on each other: the count after a join is exact.
SELECT pg_advisory_xact_lock(k) FROM (
  SELECT DISTINCT hashtextextended('compass.member:' || a::text, 0) AS k
  FROM unnest(%(ids)s::uuid[]) a ORDER BY k
) s

-- name: memberships_over
SELECT account_id FROM channel_members
WHERE account_id = ANY(%(ids)s::uuid[])
GROUP BY account_id HAVING count(*) > %(most)s
LIMIT 1

-- name: follow_up_default_as_member
-- The channel's default and who may set it, locked for the change.
SELECT c.kind, c.follow_up_default AS policy,
       (a.kind = 'human' AND (a.role = 'admin' OR c.created_by = a.id)) AS may
FROM channels c, accounts a
WHERE c.id = %(id)s AND a.id = %(actor)s
  AND EXISTS (SELECT 1 FROM compass_participation p
              WHERE p.account_id = %(actor)s AND p.channel_id = c.id)
FOR NO KEY UPDATE OF c

-- name: follow_up_default_for_operator
SELECT c.kind, c.follow_up_default AS policy, true AS may FROM channels c WHERE c.id = %(id)s

-- name: set_channel_follow_up_default
UPDATE channels SET follow_up_default = %(policy)s WHERE id = %(id)s

-- name: workspace_follow_up_default
SELECT follow_up_default AS policy FROM workspaces WHERE id = compass_workspace()

-- name: set_workspace_follow_up_default
UPDATE workspaces SET follow_up_default = %(policy)s WHERE id = compass_workspace()
RETURNING follow_up_default AS policy

-- name: channel_workspace
SELECT compass_channel_workspace(%(id)s) AS workspace_id

-- name: members_of
SELECT channel_id, account_id FROM channel_members WHERE channel_id = ANY(%(ids)s::uuid[])
