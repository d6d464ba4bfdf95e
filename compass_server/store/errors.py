"""The store's small set of errors; the servers map each to one status code.

A message goes to clients as it is: it names the caller's input, never
database or exception text.
"""

from __future__ import annotations

# Input quoted back in a message shows at most this many characters of it.
MAX_QUOTED_CHARS = 64


def quoted(value: str) -> str:
    """Client input as an error message quotes it: its start, when long."""
    if len(value) <= MAX_QUOTED_CHARS:
        return repr(value)
    return f"{value[:MAX_QUOTED_CHARS]!r}… ({len(value)} characters)"


class StoreError(Exception):
    """Base of every error the store raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(StoreError):
    """The row does not exist or the caller can't see it (the two are one)."""


class PermissionDenied(StoreError):
    """The caller can see the row but may not do this to it."""


class Conflict(StoreError):
    """The target is already in a terminal state (an ask answered, withdrawn,
    declined or expired; a session taken)."""


class FailedPrecondition(StoreError):
    """The target's state rules the operation out (e.g. rotating a revoked
    token, demoting the last admin); it won't succeed until that changes."""


class Unauthenticated(StoreError):
    """The token is unknown, revoked or expired."""


class InvalidArgument(StoreError):
    """The input breaks a rule, whatever the state of the database."""


class ResourceExhausted(StoreError):
    """The input is over a size limit or a bound is reached."""


class Unavailable(StoreError):
    """The database can't be reached right now; the call may be retried."""


class Corrupt(StoreError):
    """A stored row breaks an invariant (e.g. an ask both answered and cancelled).

    Raised loudly on read; the servers report it as INTERNAL.
    """
