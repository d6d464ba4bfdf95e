"""Channels and DMs: who is in them, their topics, and what an account takes part in."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Sequence
from typing import Any

from compass_server.store.accounts import require_accounts
from compass_server.store.db import Conn, Database, queries
from compass_server.store.errors import (
    InvalidArgument,
    NotFound,
    ResourceExhausted,
)
from compass_server.store.events import (
    PendingEvents,
)
from compass_server.store.pages import MAX_PAGE, page_size
from compass_server.store.pages import decode_token as _decode_token
from compass_server.store.pages import encode_token as _encode_token
from compass_server.store.types import (
    Actor,
    Channel,
    ChannelKind,
    Page,
    Participation,
)

CHANNELS = queries("channels")

MAX_NAME_CHARS = 80

MAX_TOPIC_CHARS = 1_000
# Channels one account may be a member of: every stream and relay session of
# the account holds the set its chain takes part in.
CHANNELS_PER_ACCOUNT = 10_000


def _channel(row: dict[str, Any]) -> Channel:
    return Channel(
        channel_id=row["id"],
        name=row["name"],
        topic=row["topic"],
        kind=ChannelKind(row["kind"]),
        member_ids=tuple(row["member_ids"]),
        created_at=row["created_at"],
    )


class Channels:
    """Channels, DMs and membership."""

    db: Database
    channels_per_account: int

    async def _channel_as_member(self, conn: Conn, actor: Actor, channel_id: uuid.UUID) -> Channel:
        cur = await conn.execute(
            CHANNELS["get_channel_as_member"], {"id": channel_id, "actor": actor.account_id}
        )
        row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no channel {channel_id}")
        return _channel(row)

    async def _join(
        self, conn: Conn, actor: Actor, channel_id: uuid.UUID, ids: Sequence[uuid.UUID]
    ) -> list[uuid.UUID]:
        """Makes the accounts members (those not yet), within each account's
        bound on channels; the accounts that joined."""
        await conn.execute(CHANNELS["lock_memberships"], {"ids": list(ids)})
        joined = []
        for account_id in ids:
            cur = await conn.execute(
                CHANNELS["add_member"], {"channel_id": channel_id, "account_id": account_id}
            )
            if await cur.fetchone() is not None:
                joined.append(account_id)
        if joined:
            most = self.channels_per_account
            row = await (
                await conn.execute(CHANNELS["memberships_over"], {"ids": joined, "most": most})
            ).fetchone()
            if row is not None:
                who = (
                    "you are"
                    if row["account_id"] == actor.account_id
                    else f"account {row['account_id']} is"
                )
                raise ResourceExhausted(
                    f"{who} in {most} channels already, the most an account may be in; "
                    "nothing changed"
                )
        return joined

    async def create_channel(
        self, actor: Actor, name: str, topic: str, member_ids: Sequence[uuid.UUID]
    ) -> Channel:
        if not name.strip() or len(name) > MAX_NAME_CHARS:
            raise InvalidArgument(f"a channel name needs 1 to {MAX_NAME_CHARS} characters")
        if len(topic) > MAX_TOPIC_CHARS:
            raise InvalidArgument(f"a topic is at most {MAX_TOPIC_CHARS} characters")
        members = list(dict.fromkeys([actor.account_id, *member_ids]))
        if len(members) > MAX_PAGE:
            raise InvalidArgument(f"a channel starts with at most {MAX_PAGE} members")
        channel_id = uuid.uuid4()
        events = PendingEvents()
        async with self.db.tx(actor) as conn:
            await require_accounts(conn, members)
            await conn.execute(
                CHANNELS["insert_channel"],
                {
                    "id": channel_id,
                    "name": name,
                    "topic": topic,
                    "kind": "channel",
                    "dm_key": None,
                    "created_by": actor.account_id,
                },
            )
            await self._join(conn, actor, channel_id, members)
            channel = await self._channel_as_member(conn, actor, channel_id)
            events.channel(channel)
            await events.append(conn)
        return channel

    async def list_channels(self, actor: Actor, size: int, token: str) -> Page[Channel]:
        limit = page_size(size)
        after_created, after_id = (
            datetime.datetime.min.replace(tzinfo=datetime.UTC),
            uuid.UUID(int=0),
        )
        if token:
            created, cid = _decode_token(token, 2)
            try:
                after_created, after_id = datetime.datetime.fromisoformat(created), uuid.UUID(cid)
            except ValueError:
                raise InvalidArgument("page_token is not one this server issued") from None
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(
                CHANNELS["list_channels"],
                {
                    "actor": actor.account_id,
                    "after_created": after_created,
                    "after_id": after_id,
                    "limit": limit + 1,
                },
            )
            rows = await cur.fetchall()
        items = [_channel(r) for r in rows[:limit]]
        next_token = ""
        if len(rows) > limit:
            last = items[-1]
            next_token = _encode_token(last.created_at.isoformat(), last.channel_id)
        return Page(items, next_token)

    async def open_dm(self, actor: Actor, other_id: uuid.UUID) -> Channel:
        if other_id == actor.account_id:
            raise InvalidArgument("a DM needs another account")
        dm_key = ":".join(sorted([str(actor.account_id), str(other_id)]))
        events = PendingEvents()
        async with self.db.tx(actor) as conn:
            await require_accounts(conn, [other_id])
            await conn.execute(CHANNELS["lock_dm"], {"dm_key": dm_key})
            row = await (
                await conn.execute(CHANNELS["channel_by_dm_key"], {"dm_key": dm_key})
            ).fetchone()
            if row is not None:
                return await self._channel_as_member(conn, actor, row["id"])
            channel_id = uuid.uuid4()
            await conn.execute(
                CHANNELS["insert_channel"],
                {
                    "id": channel_id,
                    "name": "",
                    "topic": "",
                    "kind": "dm",
                    "dm_key": dm_key,
                    "created_by": actor.account_id,
                },
            )
            await self._join(conn, actor, channel_id, [actor.account_id, other_id])
            channel = await self._channel_as_member(conn, actor, channel_id)
            events.channel(channel)
            await events.append(conn)
        return channel

    async def _lock_channel(
        self, conn: Conn, actor: Actor, channel_id: uuid.UUID, not_for_dm: str
    ) -> None:
        """Locks a channel the actor belongs to for a change DMs don't take."""
        cur = await conn.execute(
            CHANNELS["lock_channel_as_member"], {"id": channel_id, "actor": actor.account_id}
        )
        row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no channel {channel_id}")
        if row["kind"] == ChannelKind.DM:
            raise InvalidArgument(not_for_dm)

    async def add_channel_member(
        self, actor: Actor, channel_id: uuid.UUID, account_id: uuid.UUID
    ) -> Channel:
        events = PendingEvents()
        async with self.db.tx(actor) as conn:
            await self._lock_channel(
                conn, actor, channel_id, "a DM has exactly two members; create a channel instead"
            )
            await require_accounts(conn, [account_id])
            added = await self._join(conn, actor, channel_id, [account_id])
            channel = await self._channel_as_member(conn, actor, channel_id)
            if added:
                events.channel(channel)
                # Joining can't open an ask, but it can make one count again.
                await events.presence(conn, account_id)
                await events.append(conn)
        return channel

    async def update_topic(self, actor: Actor, channel_id: uuid.UUID, topic: str) -> Channel:
        if len(topic) > MAX_TOPIC_CHARS:
            raise InvalidArgument(f"a topic is at most {MAX_TOPIC_CHARS} characters")
        events = PendingEvents()
        async with self.db.tx(actor) as conn:
            await self._lock_channel(conn, actor, channel_id, "a DM has no topic")
            await conn.execute(CHANNELS["update_topic"], {"id": channel_id, "topic": topic})
            channel = await self._channel_as_member(conn, actor, channel_id)
            events.channel(channel)
            await events.append(conn)
        return channel

    async def participation(self, actor: Actor) -> Participation:
        """The actor's chain and the channels it takes part in, as of now."""
        async with self.db.tx(actor) as conn:
            return await participation_of(conn, actor.account_id)


async def participation_of(conn: Conn, account_id: uuid.UUID) -> Participation:
    """An account's chain and the channels it takes part in, as `conn` sees them."""
    cur = await conn.execute(CHANNELS["participation"], {"actor": account_id})
    rows = await cur.fetchall()
    channels = {r["channel_id"]: r["since"] for r in rows if r["channel_id"] is not None}
    chain = tuple(rows[0]["chain"]) if rows else (account_id,)
    return Participation(account_id, chain, channels)
