"""Ask rules that are not SQL: the expiry loop every server runs."""

from compass_server.asks.expiry import DEADLINES, Expiry

__all__ = ["DEADLINES", "Expiry"]
