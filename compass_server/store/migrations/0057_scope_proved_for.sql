-- What a transaction's scope was proved for: the credential and the account
-- it was asked to vouch for. A write function proving the same again in the
-- same transaction takes the note instead of reading the credentials again.
ALTER TABLE compass_scopes ADD COLUMN credential bytea, ADD COLUMN asked uuid;
