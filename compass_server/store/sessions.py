"""Runner sessions, the delivery lane's cursor, and server liveness."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping

from compass_server.store.channels import participation_of
from compass_server.store.db import Conn, Database, queries
from compass_server.store.errors import (
    NotFound,
)
from compass_server.store.presence import refresh_presence
from compass_server.store.types import (
    RunnerPrincipal,
    Scope,
    SessionBinding,
)

SESSIONS = queries("sessions")


class Sessions:
    """Relay sessions bound by runners, and the servers that hold them."""

    db: Database

    async def bind_session(
        self, runner: RunnerPrincipal, agent_id: uuid.UUID, server_id: uuid.UUID
    ) -> SessionBinding:
        """Binds an agent assigned to this runner; NOT_FOUND for any other."""
        session_id = uuid.uuid4()
        async with self.db.tx(runner) as conn:
            cur = await conn.execute(
                SESSIONS["bind_session"],
                {
                    "id": session_id,
                    "agent_id": agent_id,
                    "runner_id": runner.runner_id,
                    "server_id": server_id,
                },
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFound(f"agent {agent_id} is not assigned to this runner")
            await refresh_presence(conn, agent_id)
            # One transaction less for each of the thousands of binds of a restart.
            participation = await participation_of(conn, agent_id)
        return SessionBinding(session_id, agent_id, row["acked_event_id"], participation)

    async def unbind_session(self, server_id: uuid.UUID, session_id: uuid.UUID) -> None:
        """Ends a session this server bound. Server housekeeping, as
        maintenance: it runs when the session's stream ends, also after the
        runner's token stopped signing in."""
        async with self.db.maintenance() as conn:
            await conn.execute(SESSIONS["end_session"], {"server_id": server_id, "id": session_id})

    async def ack_delivery(self, scope: Scope, agent_id: uuid.UUID, event_id: int) -> int:
        async with self.db.tx(scope) as conn:
            row = await (
                await conn.execute(SESSIONS["ack"], {"agent_id": agent_id, "event_id": event_id})
            ).fetchone()
        if row is None:
            raise NotFound(f"no delivery lane for agent {agent_id}")
        return int(row["acked_event_id"])

    async def heartbeat(self, server_id: uuid.UUID) -> bool:
        """Marks the server alive; False when its row was gone (it was reaped)."""
        async with self.db.maintenance() as conn:
            row = await (await conn.execute(SESSIONS["heartbeat"], {"id": server_id})).fetchone()
        assert row is not None
        return not row["inserted"]

    async def remove_server(self, server_id: uuid.UUID) -> None:
        """Removes the server's row and ends every session it still holds."""
        async with self.db.maintenance() as conn:
            await self._end_server_sessions(conn, server_id)
            await conn.execute(SESSIONS["remove_server"], {"id": server_id})

    async def end_server_sessions(self, server_id: uuid.UUID) -> int:
        """Ends every session the server holds, at once; how many agents'."""
        async with self.db.maintenance() as conn:
            return await self._end_server_sessions(conn, server_id)

    async def save_cursors(self, cursors: Mapping[uuid.UUID, int]) -> None:
        """Moves agents' delivery cursors forward (never back), in any workspace."""
        if not cursors:
            return
        async with self.db.maintenance() as conn:
            await conn.execute(
                SESSIONS["save_cursors"],
                {"agent_ids": list(cursors), "event_ids": list(cursors.values())},
            )

    @staticmethod
    async def _end_server_sessions(conn: Conn, server_id: uuid.UUID) -> int:
        """Ends them; how many agents' sessions it ended."""
        cur = await conn.execute(SESSIONS["end_server_sessions"], {"id": server_id})
        return len(await cur.fetchall())

    async def reap_stale_servers(
        self, stale_after: datetime.timedelta
    ) -> list[tuple[uuid.UUID, uuid.UUID]]:
        """Removes servers silent for longer than stale_after and their sessions,
        and recomputes those agents' presence, in one transaction."""
        async with self.db.maintenance() as conn:
            cur = await conn.execute(SESSIONS["reap_stale_sessions"], {"stale": stale_after})
            return [(r["workspace_id"], r["agent_id"]) for r in await cur.fetchall()]
