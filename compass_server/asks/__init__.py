"""Ask rules that are not SQL: the expiry loop every server runs."""

from compass_server.asks.expiry import Expiry

__all__ = ["Expiry"]
