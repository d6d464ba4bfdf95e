-- name: lock_agent
-- Serializes the writes to an agent's inbox that can open an item, so the
-- open bound holds under races; taken before any item's lock.
SELECT id FROM accounts WHERE id = %(agent_id)s AND kind = 'agent' FOR NO KEY UPDATE

-- name: upsert_item
-- The item under the agent's key, created as a note if new; locked either way.
INSERT INTO inbox_items (id, workspace_id, agent_id, key, title, status, settled_at)
VALUES (%(id)s, compass_workspace(), %(agent_id)s, %(key)s, %(title)s, 'note', now())
ON CONFLICT (workspace_id, agent_id, key) DO UPDATE SET key = excluded.key
RETURNING id, (xmax = 0) AS created

-- name: item_agent_as_viewer
-- Whose item it is, unlocked: writers lock that agent first.
SELECT agent_id FROM inbox_items
WHERE id = %(id)s AND agent_id IN (SELECT compass_inbox_agents(%(viewer)s))

-- name: lock_item_as_viewer
-- The item, locked for the read-modify-write, if the viewer sees its agent's inbox.
SELECT id FROM inbox_items
WHERE id = %(id)s AND agent_id IN (SELECT compass_inbox_agents(%(viewer)s))
FOR UPDATE

-- name: lock_item_by_key
SELECT id FROM inbox_items WHERE agent_id = %(agent_id)s AND key = %(key)s FOR UPDATE

-- name: item
-- One item as read, with its newest ask.
SELECT i.id, i.agent_id, acc.handle AS agent_handle, i.key, i.title, i.status, i.revision,
       i.ask_message_id, am.ask_id, am.blocks AS ask_blocks, am.ask_status,
       coalesce(am.withdrawn_reason, '') AS close_reason,
       i.answered_by, i.closed_by, i.created_at, i.updated_at, i.settled_at
FROM inbox_items i
JOIN accounts acc ON acc.id = i.agent_id
LEFT JOIN inbox_messages am ON am.id = i.ask_message_id
WHERE i.id = %(id)s

-- name: visible_item
SELECT 1 AS ok FROM inbox_items
WHERE id = %(id)s AND agent_id IN (SELECT compass_inbox_agents(%(viewer)s))

-- name: list_items
-- The viewer's items, most recently changed first.
SELECT i.id, i.agent_id, acc.handle AS agent_handle, i.key, i.title, i.status, i.revision,
       i.ask_message_id, am.ask_id, am.blocks AS ask_blocks, am.ask_status,
       coalesce(am.withdrawn_reason, '') AS close_reason,
       i.answered_by, i.closed_by, i.created_at, i.updated_at, i.settled_at
FROM inbox_items i
JOIN accounts acc ON acc.id = i.agent_id
LEFT JOIN inbox_messages am ON am.id = i.ask_message_id
WHERE i.agent_id IN (SELECT compass_inbox_agents(%(viewer)s))
  AND (cardinality(%(statuses)s::text[]) = 0 OR i.status = ANY(%(statuses)s::text[]))
  AND (%(agent_id)s::uuid IS NULL OR i.agent_id = %(agent_id)s::uuid)
  AND (i.updated_at, i.id) < (%(before_updated)s, %(before_id)s)
ORDER BY i.updated_at DESC, i.id DESC
LIMIT %(limit)s

-- name: count_open
-- MAX_OPEN_PER_AGENT: the agent's other items with an open ask.
SELECT count(*) AS n FROM inbox_items
WHERE agent_id = %(agent_id)s AND status = 'open' AND id <> %(item_id)s

-- name: replace_open_asks
-- Only the standing and the ending change; the ask's content is never
-- rewritten. The agent's newer ask takes their place.
UPDATE inbox_messages SET ask_status = 'replaced',
  ending = jsonb_strip_nulls(jsonb_build_object(
    'kind', 'replaced', 'actor_id', %(actor)s::uuid,
    'actor_handle', (SELECT handle FROM accounts WHERE id = %(actor)s::uuid),
    'at', now(), 'surface', %(surface)s::text))
WHERE item_id = %(item_id)s AND ask_status = 'open'

-- name: insert_message
INSERT INTO inbox_messages
  (id, workspace_id, item_id, author_id, blocks, ask_id, ask_status, answers_message_id, client_key)
VALUES
  (%(id)s, compass_workspace(), %(item_id)s, %(author_id)s, %(blocks)s, %(ask_id)s,
   %(ask_status)s, %(answers_message_id)s, %(client_key)s)
RETURNING position, created_at,
  (SELECT handle FROM accounts WHERE id = %(author_id)s) AS author_handle

-- name: insert_files
INSERT INTO inbox_files
  (id, workspace_id, item_id, message_id, ordinal, name, content_type, size_bytes, data)
SELECT f.id, compass_workspace(), %(item_id)s, %(message_id)s, f.ordinal, f.name, f.content_type,
       octet_length(f.data), f.data
FROM unnest(%(ids)s::uuid[], %(names)s::text[], %(types)s::text[], %(data)s::bytea[])
  WITH ORDINALITY AS f (id, name, content_type, data, ordinal)

-- name: end_ask
-- The ask's standing, the agent's close reason (the inbox's own field), and
-- its ending in the shape compass_write_ending (migration 0009) gives Ask.ending.
UPDATE inbox_messages SET ask_status = %(status)s, withdrawn_reason = %(withdrawn_reason)s,
  ending = jsonb_strip_nulls(jsonb_build_object(
    'kind', %(kind)s::text, 'actor_id', %(actor)s::uuid,
    'actor_handle', (SELECT handle FROM accounts WHERE id = %(actor)s::uuid),
    'at', now(), 'surface', %(surface)s::text, 'reason', nullif(%(reason)s::text, '')))
WHERE id = %(id)s

-- name: reopen_ask
-- A take-back or a reopen: the same ask waits again, with no ending.
UPDATE inbox_messages SET ask_status = 'open', withdrawn_reason = NULL, ending = NULL
WHERE id = %(id)s

-- name: set_item
-- Settled whenever it is not open; updated_at moves with every change.
UPDATE inbox_items SET
  title = %(title)s,
  status = %(status)s,
  revision = %(revision)s,
  ask_message_id = %(ask_message_id)s,
  answered_by = %(answered_by)s,
  closed_by = %(closed_by)s,
  settled_at = CASE WHEN %(status)s = 'open' THEN NULL ELSE coalesce(settled_at, now()) END,
  updated_at = now()
WHERE id = %(id)s

-- name: answer_by_client_key
SELECT id FROM inbox_messages
WHERE item_id = %(item_id)s AND client_key = %(client_key)s

-- name: ask_standing
SELECT ask_status FROM inbox_messages WHERE item_id = %(item_id)s AND ask_id = %(ask_id)s

-- name: answer_of
-- The one message that answers an ask's message.
SELECT id FROM inbox_messages WHERE answers_message_id = %(ask_message_id)s

-- name: delete_message
DELETE FROM inbox_messages WHERE id = %(id)s

-- name: thread_run
-- A page's candidates, newest first, without their blocks: the messages
-- before `before` and the bytes of each as stored.
SELECT id, position, octet_length(blocks::text) AS bytes FROM inbox_messages
WHERE item_id = %(item_id)s AND position < %(before)s
ORDER BY position DESC
LIMIT %(limit)s

-- name: thread_pinned
-- The thread's first message and its open-ask message, without their blocks.
SELECT id, position, octet_length(blocks::text) AS bytes FROM inbox_messages
WHERE item_id = %(item_id)s
  AND (ask_status = 'open'
       OR position = (SELECT min(position) FROM inbox_messages WHERE item_id = %(item_id)s))
ORDER BY position

-- name: thread_total
SELECT count(*) AS total FROM inbox_messages WHERE item_id = %(item_id)s

-- name: thread_messages
-- The messages of a page, oldest first.
SELECT m.id, m.item_id, m.author_id, acc.handle AS author_handle, m.blocks, m.created_at,
       m.position, m.ask_status, coalesce(m.withdrawn_reason, '') AS withdrawn_reason, m.ending,
       (SELECT a.blocks FROM inbox_messages a WHERE a.answers_message_id = m.id) AS answer_blocks,
       coalesce((SELECT jsonb_agg(jsonb_build_array(f.id, f.name, f.content_type, f.size_bytes)
                                  ORDER BY f.ordinal)
                 FROM inbox_files f WHERE f.message_id = m.id), '[]'::jsonb) AS attachments,
       0 AS total
FROM inbox_messages m
JOIN accounts acc ON acc.id = m.author_id
WHERE m.item_id = %(item_id)s AND m.id = ANY(%(ids)s)
ORDER BY m.position

-- name: message
SELECT m.id, m.item_id, m.author_id, acc.handle AS author_handle, m.blocks, m.created_at,
       m.position, m.ask_status, coalesce(m.withdrawn_reason, '') AS withdrawn_reason, m.ending,
       (SELECT a.blocks FROM inbox_messages a WHERE a.answers_message_id = m.id) AS answer_blocks,
       coalesce((SELECT jsonb_agg(jsonb_build_array(f.id, f.name, f.content_type, f.size_bytes)
                                  ORDER BY f.ordinal)
                 FROM inbox_files f WHERE f.message_id = m.id), '[]'::jsonb) AS attachments,
       0 AS total
FROM inbox_messages m
JOIN accounts acc ON acc.id = m.author_id
WHERE m.id = %(id)s

-- name: ask_message_as_viewer
-- A message holding an ask, if the viewer sees its agent's inbox.
SELECT m.id, m.item_id, m.author_id, acc.handle AS author_handle, m.blocks, m.created_at,
       m.position, m.ask_status, coalesce(m.withdrawn_reason, '') AS withdrawn_reason, m.ending,
       (SELECT a.blocks FROM inbox_messages a WHERE a.answers_message_id = m.id) AS answer_blocks,
       '[]'::jsonb AS attachments, 0 AS total
FROM inbox_messages m
JOIN inbox_items i ON i.id = m.item_id
JOIN accounts acc ON acc.id = m.author_id
WHERE m.id = %(id)s AND m.ask_id IS NOT NULL
  AND i.agent_id IN (SELECT compass_inbox_agents(%(viewer)s))

-- name: file
SELECT f.id, f.name, f.content_type, f.size_bytes, f.data
FROM inbox_files f
JOIN inbox_items i ON i.id = f.item_id
WHERE f.id = %(id)s AND f.item_id = %(item_id)s
  AND i.agent_id IN (SELECT compass_inbox_agents(%(viewer)s))

-- name: audience
-- Who hears of an item's changes: the agent, its owner and the people granted.
SELECT id AS account_id FROM accounts WHERE id = %(agent_id)s
UNION SELECT owner_id FROM accounts WHERE id = %(agent_id)s
UNION SELECT account_id FROM inbox_grants WHERE agent_id = %(agent_id)s

-- name: agent_of
SELECT id, owner_id FROM accounts WHERE id = %(id)s AND kind = 'agent'

-- name: human
SELECT id FROM accounts WHERE id = %(id)s AND kind = 'human'

-- name: grant
INSERT INTO inbox_grants (agent_id, account_id, workspace_id)
VALUES (%(agent_id)s, %(account_id)s, compass_workspace())
ON CONFLICT DO NOTHING
