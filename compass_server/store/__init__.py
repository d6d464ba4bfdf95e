"""PostgreSQL store: schema, queries, transactions and the rules of an ask."""

from compass_server.store.db import Database, migrate
from compass_server.store.errors import (
    Conflict,
    Corrupt,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    StoreError,
    Unauthenticated,
    Unavailable,
)
from compass_server.store.store import Store

__all__ = [
    "Conflict",
    "Corrupt",
    "Database",
    "FailedPrecondition",
    "InvalidArgument",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "Store",
    "StoreError",
    "Unauthenticated",
    "Unavailable",
    "migrate",
]
