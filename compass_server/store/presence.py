"""Presence: an agent's state as people see it, and the status it sets."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence

from compass_server.store.db import Conn, Database, queries
from compass_server.store.errors import (
    InvalidArgument,
    PermissionDenied,
)
from compass_server.store.types import (
    Actor,
    Presence,
    PresenceState,
    Scope,
)

ACCOUNTS = queries("accounts")
CHANNELS = queries("channels")

MAX_STATUS_CHARS = 200


async def refresh_presence(conn: Conn, agent_id: uuid.UUID) -> None:
    """Recomputes an agent's presence, appending its change when it moved."""
    await conn.execute(ACCOUNTS["refresh_presence"], {"agent_id": agent_id})


class PresenceStore:
    """Presence reads and an agent's own status."""

    db: Database

    async def get_presence(
        self, actor: Actor, ids: Sequence[uuid.UUID], *, heard: bool = False
    ) -> list[Presence]:
        """The agents of `ids` (every agent when empty); with `heard`, only
        those the actor works with, whose presence its streams hear."""
        async with self.db.tx(actor) as conn:
            if heard:
                cur = await conn.execute(
                    ACCOUNTS["presence_heard"], {"ids": list(ids), "actor": actor.account_id}
                )
            else:
                cur = await conn.execute(ACCOUNTS["presence_of"], {"ids": list(ids)})
            rows = await cur.fetchall()
        return [
            Presence(r["id"], PresenceState(r["presence_state"]), r["presence_text"]) for r in rows
        ]

    async def granted_agents(self, actor: Actor) -> frozenset[uuid.UUID]:
        """The agents whose inbox the actor hears by a grant (besides its own)."""
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(ACCOUNTS["granted_agents"], {"actor": actor.account_id})
            return frozenset(r["agent_id"] for r in await cur.fetchall())

    async def chains(
        self, scope: Scope, ids: Collection[uuid.UUID]
    ) -> dict[uuid.UUID, tuple[tuple[uuid.UUID, ...], uuid.UUID | None]]:
        """Each account's chain (itself, then the agents above it) and owner."""
        async with self.db.tx(scope) as conn:
            cur = await conn.execute(ACCOUNTS["chains"], {"ids": list(ids)})
            return {
                r["id"]: (tuple(r["chain"] or (r["id"],)), r["owner_id"])
                for r in await cur.fetchall()
            }

    async def members_of(
        self, scope: Scope, channel_ids: Collection[uuid.UUID]
    ) -> dict[uuid.UUID, frozenset[uuid.UUID]]:
        """The members of each channel (a channel with none is left out)."""
        found: dict[uuid.UUID, set[uuid.UUID]] = {}
        async with self.db.tx(scope) as conn:
            cur = await conn.execute(CHANNELS["members_of"], {"ids": list(channel_ids)})
            for r in await cur.fetchall():
                found.setdefault(r["channel_id"], set()).add(r["account_id"])
        return {c: frozenset(m) for c, m in found.items()}

    async def set_status(self, actor: Actor, state: PresenceState, text: str) -> Presence:
        if state not in (PresenceState.IDLE, PresenceState.WORKING):
            raise InvalidArgument("an agent sets its status to idle or working")
        if len(text) > MAX_STATUS_CHARS:
            raise InvalidArgument(f"a status text is at most {MAX_STATUS_CHARS} characters")
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(
                ACCOUNTS["set_status"],
                {"id": actor.account_id, "status": state.value, "status_text": text},
            )
            if await cur.fetchone() is None:
                raise PermissionDenied("only an agent has a status")
            await refresh_presence(conn, actor.account_id)
            cur = await conn.execute(ACCOUNTS["presence_of"], {"ids": [actor.account_id]})
            row = await cur.fetchone()
        assert row is not None
        return Presence(row["id"], PresenceState(row["presence_state"]), row["presence_text"])
