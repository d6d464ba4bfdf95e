-- name: post_once
-- A lone post with a client key or an ask's print (migration 0026).
SELECT compass_posts_once(jsonb_build_array(%(item)s::jsonb)) -> 0 AS message

-- name: posts_once
-- Posts written together, each looked up by its key and print first: one
-- result per item, in order.
SELECT compass_posts_once(%(items)s) AS message
