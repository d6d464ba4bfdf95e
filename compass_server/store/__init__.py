"""PostgreSQL store: schema, queries, transactions and the rules of an ask."""

from compass_server.store.db import Database, migrate
from compass_server.store.errors import (
    Conflict,
    Corrupt,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    StoreError,
    Unavailable,
)
from compass_server.store.store import Store

__all__ = [
    "Conflict",
    "Corrupt",
    "Database",
    "InvalidArgument",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "Store",
    "StoreError",
    "Unavailable",
    "migrate",
]
