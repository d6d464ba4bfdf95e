-- Every ended inbox ask keeps its ending beside its standing, as a decline's
-- has since 0010: the kind, who, when, through which surface and why, in the
-- shape compass_write_ending (0009) gives Ask.ending. Kinds an inbox adds:
-- 'replaced' (the agent's newer ask took its place) and 'withdrawn_by_person'
-- (a person closed the item); the agent's close is 'withdrawn_by_agent' with
-- its reason. The standing (ask_status, withdrawn_reason) says what it said.
--
-- An open ask has no ending, and an ended one's agrees with its standing.
-- An ended one may lack it: one an older server ends while this one runs
-- beside it; it reads the kind its standing gives. The file can be applied
-- again: it only fills endings that are missing.
ALTER TABLE inbox_messages DROP CONSTRAINT IF EXISTS inbox_messages_ending_check;
ALTER TABLE inbox_messages ADD CONSTRAINT inbox_messages_ending_check
  CHECK (CASE
           WHEN ask_status IS NULL OR ask_status = 'open' THEN ending IS NULL
           WHEN ending IS NULL THEN ask_status <> 'declined'
           ELSE (ask_status, ending ->> 'kind') IN (
             ('replaced', 'replaced'), ('answered', 'answered'),
             ('withdrawn', 'withdrawn_by_agent'), ('withdrawn', 'withdrawn_by_person'),
             ('declined', 'declined'))
         END);

-- The asks that ended before: answered by the answering message's author
-- when it was written, replaced by the agent when its next ask was posted
-- (each ending is written in the transaction of that message, at its time).
UPDATE inbox_messages m SET ending = jsonb_build_object(
    'kind', 'answered', 'actor_id', a.author_id, 'actor_handle', acc.handle,
    'at', a.created_at, 'surface', 'inbox')
FROM inbox_messages a JOIN accounts acc ON acc.id = a.author_id
WHERE a.answers_message_id = m.id AND m.ask_status = 'answered' AND m.ending IS NULL;

UPDATE inbox_messages m SET ending = jsonb_build_object(
    'kind', 'replaced', 'actor_id', m.author_id, 'actor_handle', acc.handle,
    'at', n.created_at, 'surface', 'relay')
FROM inbox_messages this
  JOIN accounts acc ON acc.id = this.author_id
  CROSS JOIN LATERAL (
    SELECT created_at FROM inbox_messages n
    WHERE n.item_id = this.item_id AND n.ask_id IS NOT NULL AND n.position > this.position
    ORDER BY n.position LIMIT 1
  ) n
WHERE this.id = m.id AND m.ask_status = 'replaced' AND m.ending IS NULL;

-- Withdrawn ones: when is not kept. The agent's close gave a reason; a
-- person's close is named by its item while the item still stands for it.
UPDATE inbox_messages m SET ending = jsonb_build_object(
    'kind', 'withdrawn_by_agent', 'actor_id', m.author_id, 'actor_handle', acc.handle,
    'surface', 'relay', 'reason', m.withdrawn_reason)
FROM accounts acc
WHERE acc.id = m.author_id AND m.ask_status = 'withdrawn' AND m.withdrawn_reason IS NOT NULL
  AND m.ending IS NULL;

UPDATE inbox_messages m SET ending = jsonb_strip_nulls(jsonb_build_object(
    'kind', 'withdrawn_by_person', 'actor_id', closer.id, 'actor_handle', closer.handle,
    'surface', 'inbox'))
FROM inbox_messages this
  LEFT JOIN LATERAL (
    SELECT acc.id, acc.handle FROM inbox_items i JOIN accounts acc ON acc.id = i.closed_by
    WHERE i.ask_message_id = this.id AND i.status = 'closed'
  ) closer ON true
WHERE this.id = m.id AND m.ask_status = 'withdrawn' AND m.withdrawn_reason IS NULL
  AND m.ending IS NULL;
