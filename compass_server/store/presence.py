"""Presence: an agent's state as people see it, and the status it sets."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from compass_server.store.db import Conn, Database, queries
from compass_server.store.errors import (
    InvalidArgument,
    PermissionDenied,
)
from compass_server.store.types import (
    Actor,
    Presence,
    PresenceState,
)

ACCOUNTS = queries("accounts")

MAX_STATUS_CHARS = 200


async def refresh_presence(conn: Conn, agent_id: uuid.UUID) -> None:
    """Recomputes an agent's presence, appending its change when it moved."""
    await conn.execute(ACCOUNTS["refresh_presence"], {"agent_id": agent_id})


class PresenceStore:
    """Presence reads and an agent's own status."""

    db: Database

    async def get_presence(self, actor: Actor, ids: Sequence[uuid.UUID]) -> list[Presence]:
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(ACCOUNTS["presence_of"], {"ids": list(ids)})
            rows = await cur.fetchall()
        return [
            Presence(r["id"], PresenceState(r["presence_state"]), r["presence_text"]) for r in rows
        ]

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
