-- name: insert_channel
INSERT INTO channels (id, workspace_id, name, topic, kind, dm_key)
VALUES (%(id)s, compass_workspace(), %(name)s, %(topic)s, %(kind)s, %(dm_key)s)
ON CONFLICT (workspace_id, dm_key) DO NOTHING
RETURNING id

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
-- The channel, if the actor belongs to it; its members in join order.
SELECT c.id, c.name, c.topic, c.kind, c.created_at,
       array(SELECT cm2.account_id FROM channel_members cm2
             WHERE cm2.channel_id = c.id ORDER BY cm2.joined_at, cm2.account_id) AS member_ids
FROM channels c
JOIN channel_members cm ON cm.channel_id = c.id AND cm.account_id = %(actor)s
WHERE c.id = %(id)s

-- name: lock_channel_as_member
SELECT c.id, c.kind FROM channels c
JOIN channel_members cm ON cm.channel_id = c.id AND cm.account_id = %(actor)s
WHERE c.id = %(id)s
FOR UPDATE OF c

-- name: list_channels
SELECT c.id, c.name, c.topic, c.kind, c.created_at,
       array(SELECT cm2.account_id FROM channel_members cm2
             WHERE cm2.channel_id = c.id ORDER BY cm2.joined_at, cm2.account_id) AS member_ids
FROM channels c
JOIN channel_members cm ON cm.channel_id = c.id AND cm.account_id = %(actor)s
WHERE (c.created_at, c.id) > (%(after_created)s, %(after_id)s)
ORDER BY c.created_at, c.id
LIMIT %(limit)s

-- name: update_topic
UPDATE channels SET topic = %(topic)s WHERE id = %(id)s

-- name: member_channel_ids
SELECT channel_id FROM channel_members WHERE account_id = %(actor)s
