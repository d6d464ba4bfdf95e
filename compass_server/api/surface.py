"""Which surface a call came through, for an ask's record: gRPC, Connect or
the web page (set by the transports), or the relay (set for its arms)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from compass_server.store.types import Surface

# The web page names itself on its Connect calls; any other value is Connect.
HEADER = "compass-surface"

_CURRENT: contextvars.ContextVar[Surface | None] = contextvars.ContextVar(
    "compass_surface", default=None
)


def current() -> Surface | None:
    return _CURRENT.get()


@contextlib.contextmanager
def through(surface: Surface) -> Iterator[None]:
    token = _CURRENT.set(surface)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def of_connect(header: str | None) -> Surface:
    return Surface.WEB if header == Surface.WEB.value else Surface.CONNECT
