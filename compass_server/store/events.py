"""The event log: what each event carries, how a transaction appends its
events, and how they are read.

Each write appends its events in its own transaction, so an event exists if
and only if its change committed; events are written and get their ids as
the transaction commits (migration 0043), so a read after a write sees it."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from psycopg.types.json import Jsonb

from compass_server.store import blocks as blockrules
from compass_server.store.db import Conn, Database, queries
from compass_server.store.types import (
    AgentMove,
    AskStatus,
    Attachment,
    Channel,
    ChannelKind,
    Event,
    EventKind,
    InboxChange,
    InboxMessage,
    InboxStatus,
    Presence,
    PresenceState,
    Scope,
)
from compass_server.store.weight import weigh

ACCOUNTS = queries("accounts")

EVENTS = queries("events")

# A page of the event log, in payload bytes (at least one event).
EVENT_PAGE_BYTES = 1 << 20


def channel_payload(c: Channel) -> dict[str, Any]:
    return {
        "id": str(c.channel_id),
        "name": c.name,
        "topic": c.topic,
        "kind": c.kind.value,
        "member_ids": [str(m) for m in c.member_ids],
        "created_at": c.created_at.isoformat(),
    }


def inbox_message_payload(m: InboxMessage) -> dict[str, Any]:
    return {
        "message_id": str(m.message_id),
        "item_id": str(m.item_id),
        "author_id": str(m.author_id),
        "author_handle": m.author_handle,
        "blocks": blockrules.blocks_to_json(m.blocks),
        "created_at": m.created_at.isoformat(),
        "position": m.position,
        "ask_status": m.ask_status.value if m.ask_status else None,
        "withdrawn_reason": m.withdrawn_reason,
        "attachments": [
            [str(a.attachment_id), a.name, a.content_type, a.size_bytes] for a in m.attachments
        ],
    }


def _inbox_message_from_payload(p: dict[str, Any]) -> InboxMessage:
    return InboxMessage(
        message_id=uuid.UUID(p["message_id"]),
        item_id=uuid.UUID(p["item_id"]),
        author_id=uuid.UUID(p["author_id"]),
        author_handle=p["author_handle"],
        blocks=blockrules.blocks_from_json(p["blocks"]),
        created_at=datetime.datetime.fromisoformat(p["created_at"]),
        position=p["position"],
        ask_status=AskStatus(p["ask_status"]) if p["ask_status"] else None,
        withdrawn_reason=p["withdrawn_reason"],
        attachments=tuple(Attachment(uuid.UUID(a[0]), a[1], a[2], a[3]) for a in p["attachments"]),
    )


def _inbox_change_payload(c: InboxChange) -> dict[str, Any]:
    return {
        "item_id": str(c.item_id),
        "agent_id": str(c.agent_id),
        "key": c.key,
        "revision": c.revision,
        "status": c.status.value,
        "actor_id": str(c.actor_id),
        "audience": [str(a) for a in c.audience],
        "message": inbox_message_payload(c.message) if c.message else None,
    }


def _inbox_change_from_payload(p: dict[str, Any]) -> InboxChange:
    return InboxChange(
        item_id=uuid.UUID(p["item_id"]),
        agent_id=uuid.UUID(p["agent_id"]),
        key=p["key"],
        revision=p["revision"],
        status=InboxStatus(p["status"]),
        actor_id=uuid.UUID(p["actor_id"]),
        audience=tuple(uuid.UUID(a) for a in p["audience"]),
        message=_inbox_message_from_payload(p["message"]) if p["message"] else None,
    )


def event_from_row(row: dict[str, Any]) -> Event:
    kind = EventKind(row["kind"])
    p = row["payload"]
    message = presence = channel = inbox = moved = None
    if kind in (EventKind.MESSAGE_POSTED, EventKind.MESSAGE_UPDATED):
        message = blockrules.message_from_json(p)
    elif kind is EventKind.AGENT_MOVED:
        parent = p["parent_id"]
        moved = AgentMove(uuid.UUID(p["account_id"]), uuid.UUID(parent) if parent else None)
    elif kind is EventKind.INBOX_ITEM_CHANGED:
        inbox = _inbox_change_from_payload(p)
    elif kind is EventKind.PRESENCE_CHANGED:
        presence = Presence(
            account_id=uuid.UUID(p["account_id"]),
            state=PresenceState(p["state"]),
            status_text=p.get("status_text", ""),
        )
    else:
        channel = Channel(
            channel_id=uuid.UUID(p["id"]),
            name=p["name"],
            topic=p["topic"],
            kind=ChannelKind(p["kind"]),
            member_ids=tuple(uuid.UUID(m) for m in p["member_ids"]),
            created_at=datetime.datetime.fromisoformat(p["created_at"]),
        )
    event = Event(
        event_id=row["id"],
        kind=kind,
        channel_id=row["channel_id"],
        message=message,
        presence=presence,
        channel=channel,
        created_at=row["created_at"],
        inbox=inbox,
        moved=moved,
    )
    # Bounds count what the event weighs decoded: several times its stored
    # bytes when it is many small fields.
    object.__setattr__(event, "size", max(row.get("size", 0), weigh(event)))
    return event


class PendingEvents:
    """Events a transaction appends just before it commits."""

    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.channel_ids: list[uuid.UUID | None] = []
        self.payloads: list[Jsonb] = []

    def channel(self, c: Channel) -> None:
        self.kinds.append(EventKind.CHANNEL_CHANGED.value)
        self.channel_ids.append(c.channel_id)
        self.payloads.append(Jsonb(channel_payload(c)))

    def inbox(self, c: InboxChange) -> None:
        # Of no channel, like presence; its audience travels in the payload.
        self.kinds.append(EventKind.INBOX_ITEM_CHANGED.value)
        self.channel_ids.append(None)
        self.payloads.append(Jsonb(_inbox_change_payload(c)))

    async def presence(self, conn: Conn, agent_id: uuid.UUID) -> None:
        """Recomputes an agent's presence; its change is appended with the rest."""
        cur = await conn.execute(ACCOUNTS["presence_change"], {"agent_id": agent_id})
        row = await cur.fetchone()
        if row is not None and row["change"] is not None:
            self.kinds.append(EventKind.PRESENCE_CHANGED.value)
            self.channel_ids.append(None)
            self.payloads.append(Jsonb(row["change"]))

    async def append(self, conn: Conn) -> None:
        """Appends every event: they are written, numbered, as the transaction
        commits."""
        if self.kinds:
            await conn.execute(
                EVENTS["append_events"],
                {"kinds": self.kinds, "channel_ids": self.channel_ids, "payloads": self.payloads},
            )


class EventLog:
    """Reading the event log."""

    db: Database

    async def open_asks(self) -> int:
        """Asks open in the database."""
        async with self.db.maintenance() as conn:
            row = await (await conn.execute("SELECT * FROM compass_metrics()")).fetchone()
        return int(row["open_asks"]) if row else 0

    async def read_events(
        self, scope: Scope, after: int, limit: int, max_bytes: int = EVENT_PAGE_BYTES
    ) -> list[Event]:
        """Events after `after`, oldest first: at most `limit`, and no more than
        `max_bytes` of payload unless the first alone weighs more."""
        async with self.db.tx(scope) as conn:
            cur = await conn.execute(
                EVENTS["read_events"], {"after": after, "limit": limit, "max_bytes": max_bytes}
            )
            rows = await cur.fetchall()
        return [event_from_row(r) for r in rows]

    async def read_lane_events(
        self,
        scope: Scope,
        after: int,
        keys: Iterable[uuid.UUID],
        limit: int,
        max_bytes: int = EVENT_PAGE_BYTES,
    ) -> tuple[list[Event], int]:
        """The events after `after` that name one of `keys` (as `event_keys`
        of events.hub does), as `read_events` pages them; and the id up to
        which every event was either returned or named none of the keys."""
        async with self.db.tx(scope) as conn:
            cur = await conn.execute(
                EVENTS["read_lane_events"],
                {
                    "after": after,
                    "keys": list(keys),
                    "limit": limit,
                    "max_bytes": max_bytes,
                },
            )
            rows = await cur.fetchall()
        return [event_from_row(r) for r in rows[:-1]], int(rows[-1]["id"])

    async def lanes_with_events(
        self, scope: Scope, lanes: Sequence[tuple[int, Iterable[uuid.UUID]]]
    ) -> tuple[set[int], int]:
        """For lanes given as (cursor, keys): the indexes of those that have an
        event after their cursor naming one of their keys, and the log's head
        as the same read saw it (the others have passed every event up to it)."""
        afters: list[int] = []
        indexes: list[int] = []
        keys: list[uuid.UUID] = []
        for i, (after, lane_keys) in enumerate(lanes, 1):
            afters.append(after)
            for key in lane_keys:
                indexes.append(i)
                keys.append(key)
        async with self.db.tx(scope) as conn:
            cur = await conn.execute(
                EVENTS["lanes_with_events"], {"afters": afters, "lanes": indexes, "keys": keys}
            )
            rows = await cur.fetchall()
        head = next((int(r["head"] or 0) for r in rows if r["lane"] == 0), 0)
        return {int(r["lane"]) - 1 for r in rows if r["lane"] != 0}, head

    async def last_event_id(self, scope: Scope) -> int:
        async with self.db.tx(scope) as conn:
            row = await (await conn.execute(EVENTS["last_event_id"])).fetchone()
        return int(row["last_event_id"]) if row else 0
