"""Pages of a listing: how many items one holds and the token of the next."""

from __future__ import annotations

import base64

from compass_server.store.errors import InvalidArgument

MAX_PAGE = 200
DEFAULT_PAGE = 50


def page_size(requested: int) -> int:
    if requested < 0:
        raise InvalidArgument("page_size can't be negative")
    return min(requested or DEFAULT_PAGE, MAX_PAGE)


def encode_token(*parts: object) -> str:
    return base64.urlsafe_b64encode("|".join(map(str, parts)).encode()).decode()


def decode_token(token: str, n: int) -> list[str]:
    try:
        parts = base64.urlsafe_b64decode(token.encode()).decode().split("|")
    except (ValueError, UnicodeDecodeError):
        raise InvalidArgument("page_token is not one this server issued") from None
    if len(parts) != n:
        raise InvalidArgument("page_token is not one this server issued")
    return parts
