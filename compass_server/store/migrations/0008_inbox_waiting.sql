-- Agents with an open inbox item wait from now on.
SELECT compass_presence_change(a.id)
FROM accounts a
WHERE a.kind = 'agent'
  AND EXISTS (SELECT 1 FROM inbox_items i WHERE i.agent_id = a.id AND i.status = 'open');
