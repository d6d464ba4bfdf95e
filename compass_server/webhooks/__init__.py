"""Webhooks: what a notice of the log says (payloads, slack), where it may go
(destination), how it is signed (signing) and sent (sender), and the courier
every server runs to make, claim and send deliveries."""
