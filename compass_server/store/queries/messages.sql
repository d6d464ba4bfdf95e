-- name: post_message
-- Messages are written only by this call and the ask endings (asks.sql):
-- insert, index and record its asks, append events, in one statement.
SELECT compass_post_message(
  %(ws)s, %(id)s, %(channel_id)s, %(author_id)s, %(blocks)s, %(search_text)s,
  %(ask_ids)s::text[], %(due)s::timestamptz[], %(surface)s) AS message

-- name: is_member
SELECT 1 AS ok FROM channel_members WHERE channel_id = %(channel_id)s AND account_id = %(actor)s

-- name: get_message_as_member
SELECT m.id, m.channel_id, m.author_id, m.blocks, m.created_at, m.position, acc.handle AS author_handle
FROM messages m
JOIN channel_members cm ON cm.channel_id = m.channel_id AND cm.account_id = %(actor)s
JOIN accounts acc ON acc.id = m.author_id
WHERE m.id = %(id)s

-- name: get_ask_message
SELECT m.id, m.channel_id, m.author_id, m.blocks, m.created_at, m.position, acc.handle AS author_handle
FROM asks a
JOIN messages m ON m.id = a.message_id
JOIN channel_members cm ON cm.channel_id = m.channel_id AND cm.account_id = %(actor)s
JOIN accounts acc ON acc.id = m.author_id
WHERE a.ask_id = %(ask_id)s

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
