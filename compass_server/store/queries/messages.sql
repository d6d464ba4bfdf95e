-- name: post_message
-- Messages are written only by this call and the ask endings (asks.sql):
-- insert, index and record its asks, append events, in one statement.
SELECT compass_post_message(
  %(cred)s, %(id)s, %(channel_id)s, %(author_id)s, %(blocks)s, %(search_text)s,
  %(ask_ids)s::text[], %(due)s::timestamptz[], %(surface)s) AS message

-- name: participates
SELECT 1 AS ok FROM compass_participation
WHERE account_id = %(actor)s AND channel_id = %(channel_id)s
LIMIT 1

-- name: get_message_as_member
-- Every read of messages takes the database's clock (read_at): an ask past
-- its deadline reads expired by the clock that cuts its endings off.
SELECT m.id, m.channel_id, m.author_id, m.blocks, m.created_at, m.position, acc.handle AS author_handle,
       statement_timestamp() AS read_at
FROM messages m
JOIN accounts acc ON acc.id = m.author_id
WHERE m.id = %(id)s
  AND EXISTS (SELECT 1 FROM compass_participation p
              WHERE p.account_id = %(actor)s AND p.channel_id = m.channel_id)

-- name: get_ask_message
SELECT m.id, m.channel_id, m.author_id, m.blocks, m.created_at, m.position, acc.handle AS author_handle,
       statement_timestamp() AS read_at
FROM asks a
JOIN messages m ON m.id = a.message_id
JOIN accounts acc ON acc.id = m.author_id
WHERE a.ask_id = %(ask_id)s
  AND EXISTS (SELECT 1 FROM compass_participation p
              WHERE p.account_id = %(actor)s AND p.channel_id = m.channel_id)

-- name: message_page
-- A page of the messages the actor sees, newest first: in one channel and/or
-- matching a search pattern. At most %(limit)s, and no more than
-- %(max_bytes)s of blocks unless the first alone weighs more; `fetched` is how
-- many the count alone let through, so a page cut by bytes shows.
SELECT *, statement_timestamp() AS read_at FROM (
  SELECT page.*, sum(size) OVER (ORDER BY position DESC) AS running, count(*) OVER () AS fetched
  FROM (
    SELECT m.id, m.channel_id, m.author_id, m.blocks, m.created_at, m.position,
           acc.handle AS author_handle, octet_length(m.blocks::text) AS size
    FROM messages m
    JOIN accounts acc ON acc.id = m.author_id
    WHERE m.channel_id IN (SELECT p.channel_id FROM compass_participation p
                           WHERE p.account_id = %(actor)s)
      AND (%(channel_id)s::uuid IS NULL OR m.channel_id = %(channel_id)s::uuid)
      AND (%(pattern)s::text IS NULL OR m.search_text LIKE %(pattern)s::text)
      AND m.position < %(before)s
    ORDER BY m.position DESC
    LIMIT %(limit)s
  ) page
) bounded
WHERE running <= %(max_bytes)s OR running = size
ORDER BY position DESC

-- name: post_messages
-- Posts written together (migration 0020): one result per item, in order.
SELECT compass_post_messages(%(items)s) AS message
