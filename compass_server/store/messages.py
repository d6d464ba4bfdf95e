"""Messages as read: a channel's pages, search, one message, one ask."""

from __future__ import annotations

import uuid
from typing import Any

from compass_server.store import blocks as blockrules
from compass_server.store.db import Conn, Database, queries
from compass_server.store.errors import (
    Corrupt,
    InvalidArgument,
    NotFound,
    quoted,
)
from compass_server.store.pages import decode_token as _decode_token
from compass_server.store.pages import encode_token as _encode_token
from compass_server.store.pages import page_size
from compass_server.store.types import (
    Actor,
    Ask,
    Message,
    Page,
)

MESSAGES = queries("messages")

MAX_QUERY_CHARS = 200

# A page of messages in one response, in bytes of blocks as stored (at least
# one message): 200 of the largest would be ~50 MB.
MAX_PAGE_BYTES = 4 << 20


def _message(row: dict[str, Any]) -> Message:
    return Message(
        message_id=row["id"],
        channel_id=row["channel_id"],
        author_id=row["author_id"],
        author_handle=row["author_handle"],
        blocks=blockrules.blocks_as_of(blockrules.blocks_from_json(row["blocks"]), row["read_at"]),
        created_at=row["created_at"],
        position=row["position"],
    )


async def _readable_channel(conn: Conn, actor: Actor, channel_id: uuid.UUID) -> None:
    """NOT_FOUND unless the actor takes part in the channel (as for an unknown one)."""
    cur = await conn.execute(
        MESSAGES["participates"], {"channel_id": channel_id, "actor": actor.account_id}
    )
    if await cur.fetchone() is None:
        raise NotFound(f"no channel {channel_id}")


def _position_token(token: str) -> int:
    if not token:
        return 2**63 - 1
    (value,) = _decode_token(token, 1)
    try:
        return int(value)
    except ValueError:
        raise InvalidArgument("page_token is not one this server issued") from None


async def _message_page(
    conn: Conn,
    actor: Actor,
    channel_id: uuid.UUID | None,
    pattern: str | None,
    before: int,
    limit: int,
) -> Page[Message]:
    """A page of messages; up to limit + 1 are fetched, and the page may be
    cut short by bytes: either way, more follow."""
    cur = await conn.execute(
        MESSAGES["message_page"],
        {
            "actor": actor.account_id,
            "channel_id": channel_id,
            "pattern": pattern,
            "before": before,
            "limit": limit + 1,
            "max_bytes": MAX_PAGE_BYTES,
        },
    )
    rows = await cur.fetchall()
    items = [_message(r) for r in rows[:limit]]
    more = len(rows) > limit or (bool(rows) and rows[0]["fetched"] > len(rows))
    token = _encode_token(items[-1].position) if more else ""
    return Page(items, token)


class Messages:
    """Posting goes through Posts; these are the reads."""

    db: Database

    async def get_message(self, actor: Actor, message_id: uuid.UUID) -> Message:
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(
                MESSAGES["get_message_as_member"], {"id": message_id, "actor": actor.account_id}
            )
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no message {message_id}")
        return _message(row)

    async def get_ask(self, actor: Actor, ask_id: str) -> tuple[Message, Ask]:
        """The message holding the ask, and the ask; NOT_FOUND when the actor
        can't see it (the same as an unknown id)."""
        if not ask_id:
            raise InvalidArgument("ask_id is required")
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(
                MESSAGES["get_ask_message"], {"ask_id": ask_id, "actor": actor.account_id}
            )
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no ask {quoted(ask_id)}")
        message = _message(row)
        for block in message.blocks:
            if isinstance(block, Ask) and block.ask_id == ask_id:
                return message, block
        raise Corrupt(f"ask {quoted(ask_id)} is indexed but missing from its message")

    async def list_messages(
        self, actor: Actor, channel_id: uuid.UUID, size: int, token: str
    ) -> Page[Message]:
        limit = page_size(size)
        before = _position_token(token)
        async with self.db.tx(actor) as conn:
            await _readable_channel(conn, actor, channel_id)
            return await _message_page(conn, actor, channel_id, None, before, limit)

    async def search_messages(
        self, actor: Actor, query: str, channel_id: uuid.UUID | None, size: int, token: str
    ) -> Page[Message]:
        if not query.strip():
            raise InvalidArgument("query is required")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidArgument(f"query is at most {MAX_QUERY_CHARS} characters")
        limit = page_size(size)
        before = _position_token(token)
        escaped = query.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        async with self.db.tx(actor) as conn:
            if channel_id is not None:
                await _readable_channel(conn, actor, channel_id)
            return await _message_page(conn, actor, channel_id, f"%{escaped}%", before, limit)
