-- name: answerers
-- The accounts a post names as an ask's answerers, in order, whether each
-- takes part in the channel, and whether the author can post there at all
-- (visibility comes first).
SELECT x.id, acc.handle, acc.kind,
       EXISTS (SELECT 1 FROM compass_participation p
               WHERE p.account_id = x.id AND p.channel_id = %(channel_id)s) AS member,
       EXISTS (SELECT 1 FROM compass_participation p
               WHERE p.account_id = %(author_id)s AND p.channel_id = %(channel_id)s) AS author_member
FROM unnest(%(ids)s::uuid[]) WITH ORDINALITY AS x (id, n)
LEFT JOIN accounts acc ON acc.id = x.id
ORDER BY x.n

-- name: answer_ask
SELECT compass_answer_ask(
  %(cred)s, %(actor)s, %(ask_id)s, %(answered)s, %(answer_id)s, %(surface)s, %(standing)s)
  AS result

-- name: end_ask
SELECT compass_end_ask(
  %(cred)s, %(actor)s, %(ask_id)s, %(kind)s, %(surface)s, %(reason)s) AS result

-- name: end_asks
-- Answers and other endings written together (migration 0020): one result
-- per item, in order.
SELECT compass_end_asks(%(items)s) AS result

-- name: ask_state
-- The ask if the actor can see it (NULL state otherwise), whether the actor
-- may answer it, and who owns its author.
SELECT s.state, compass_may_answer(s.state -> 'ask', %(actor)s) AS may_answer,
       (SELECT owner_id FROM accounts WHERE id = (s.state ->> 'author_id')::uuid) AS owner_id,
       statement_timestamp() AS read_at
FROM compass_ask_state(%(ask_id)s, %(actor)s) AS s (state)

-- name: ask_history
SELECT h.kind, h.actor_id, coalesce(acc.handle, '') AS actor_handle, h.surface, h.reason, h.at,
       h.standing_answer_id
FROM ask_history h
LEFT JOIN accounts acc ON acc.id = h.actor_id
WHERE h.ask_id = %(ask_id)s
ORDER BY h.id

-- name: expire_due_asks
SELECT compass_expire_due_asks(%(batch)s) AS result

-- name: next_ask_deadline
SELECT compass_next_ask_deadline() AS due

-- name: take_follow_ups
SELECT compass_take_follow_ups(%(batch)s) AS result

-- name: next_follow_up
SELECT compass_next_follow_up() AS due

-- name: may_post_in
SELECT EXISTS (SELECT 1 FROM channel_members
               WHERE channel_id = %(channel_id)s AND account_id = %(author_id)s)
    OR EXISTS (SELECT 1 FROM compass_participation
               WHERE channel_id = %(channel_id)s AND account_id = %(author_id)s) AS may
