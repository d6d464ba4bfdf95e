-- name: insert_message
-- The only INSERT of a message row: only by a member of the channel (no row
-- back otherwise); asks are indexed by id in the same statement.
WITH m AS (
  INSERT INTO messages (id, workspace_id, channel_id, author_id, blocks, search_text)
  SELECT %(id)s, compass_workspace(), %(channel_id)s, %(author_id)s, %(blocks)s, %(search_text)s
  WHERE EXISTS (
    SELECT 1 FROM channel_members
    WHERE channel_id = %(channel_id)s AND account_id = %(author_id)s
  )
  RETURNING id, position, created_at
), a AS (
  INSERT INTO asks (ask_id, workspace_id, message_id)
  SELECT unnest(%(ask_ids)s::text[]), compass_workspace(), m.id FROM m
)
SELECT m.id, m.position, m.created_at,
       (SELECT handle FROM accounts WHERE id = %(author_id)s) AS author_handle
FROM m

-- name: lock_ask_message
-- The ask's message, locked for the read-modify-write, if the actor can see it.
SELECT m.id, m.channel_id, m.author_id, m.blocks, m.created_at, m.position, acc.handle AS author_handle
FROM asks a
JOIN messages m ON m.id = a.message_id
JOIN channel_members cm ON cm.channel_id = m.channel_id AND cm.account_id = %(actor)s
JOIN accounts acc ON acc.id = m.author_id
WHERE a.ask_id = %(ask_id)s
FOR UPDATE OF m

-- name: update_message_blocks
-- The only UPDATE of blocks: answer and cancel write server-owned ask state.
UPDATE messages SET blocks = %(blocks)s WHERE id = %(id)s

-- name: is_member
SELECT 1 AS ok FROM channel_members WHERE channel_id = %(channel_id)s AND account_id = %(actor)s

-- name: get_message_as_member
SELECT m.id, m.channel_id, m.author_id, m.blocks, m.created_at, m.position, acc.handle AS author_handle
FROM messages m
JOIN channel_members cm ON cm.channel_id = m.channel_id AND cm.account_id = %(actor)s
JOIN accounts acc ON acc.id = m.author_id
WHERE m.id = %(id)s

-- name: list_messages
SELECT m.id, m.channel_id, m.author_id, m.blocks, m.created_at, m.position, acc.handle AS author_handle
FROM messages m
JOIN accounts acc ON acc.id = m.author_id
WHERE m.channel_id = %(channel_id)s AND m.position < %(before)s
ORDER BY m.position DESC
LIMIT %(limit)s

-- name: search_messages
SELECT m.id, m.channel_id, m.author_id, m.blocks, m.created_at, m.position, acc.handle AS author_handle
FROM messages m
JOIN channel_members cm ON cm.channel_id = m.channel_id AND cm.account_id = %(actor)s
JOIN accounts acc ON acc.id = m.author_id
WHERE m.search_text LIKE %(pattern)s
  AND (%(channel_id)s::uuid IS NULL OR m.channel_id = %(channel_id)s::uuid)
  AND m.position < %(before)s
ORDER BY m.position DESC
LIMIT %(limit)s
