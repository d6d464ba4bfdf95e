"""Ids from input."""

from __future__ import annotations

import uuid

from compass_server.store.errors import (
    InvalidArgument,
    NotFound,
    quoted,
)


def parse_id(value: str, what: str) -> uuid.UUID:
    """An id from input: empty is INVALID_ARGUMENT, a malformed one can't name
    any row and is NOT_FOUND like an unknown one."""
    if not value:
        raise InvalidArgument(f"{what} is required")
    try:
        return uuid.UUID(value)
    except ValueError:
        raise NotFound(f"no {what.removesuffix('_id').replace('_', ' ')} {quoted(value)}") from None
