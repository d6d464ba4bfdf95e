"""Mail that comes in: replies to the mails about asks, by the server's own
SMTP listener or a provider's inbound-parse webhook."""
