-- name: insert_reply
INSERT INTO mail_reply_addresses (token_hash, workspace_id, ask_id, account_id)
VALUES (%(token_hash)s, compass_workspace(), %(ask_id)s, %(account_id)s)
ON CONFLICT (token_hash) DO NOTHING

-- name: reply_holder
SELECT workspace_id, ask_id, account_id, email, handle FROM compass_mail_reply(%(token_hash)s)
