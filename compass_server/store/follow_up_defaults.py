"""Follow-up defaults of a workspace and of a channel, mixed into Store.

An ask posted without a policy takes its channel's default, else its
workspace's, else the server's setting; migration 0036 applies the first two
at the insert, in the post's own transaction."""

from __future__ import annotations

import uuid
from typing import Any

from psycopg.types.json import Jsonb

from compass_server.store import blocks as blockrules
from compass_server.store.admin import AdminStore, Asker
from compass_server.store.db import Conn, Database, queries
from compass_server.store.errors import InvalidArgument, NotFound, PermissionDenied
from compass_server.store.types import Actor, ChannelKind, FollowUp, Operator

CHANNELS = queries("channels")


class FollowUpDefaults:
    db: Database
    admin: AdminStore
    deadline_bounds: blockrules.DeadlineBounds

    async def workspace_follow_up_default(self, by: Asker) -> FollowUp | None:
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            row = await (await conn.execute(CHANNELS["workspace_follow_up_default"])).fetchone()
        return blockrules.follow_up_default_from_json(row["policy"] if row else None)

    async def set_workspace_follow_up_default(
        self, by: Asker, policy: FollowUp | None
    ) -> FollowUp | None:
        """None: the workspace has none of its own; an empty policy: no
        follow-ups by default. Only an admin (or the operator)."""
        stored = blockrules.follow_up_default_to_json(policy, self.deadline_bounds)
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            cur = await conn.execute(
                CHANNELS["set_workspace_follow_up_default"],
                {"policy": None if stored is None else Jsonb(stored)},
            )
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no workspace {by.workspace_id}")
        return blockrules.follow_up_default_from_json(row["policy"])

    async def channel_follow_up_default(
        self, by: Actor | Operator, channel_id: uuid.UUID
    ) -> FollowUp | None:
        async with self.db.tx(by) as conn:
            row = await self._channel_default(conn, by, channel_id, writing=False)
        return blockrules.follow_up_default_from_json(row["policy"])

    async def set_channel_follow_up_default(
        self, by: Actor | Operator, channel_id: uuid.UUID, policy: FollowUp | None
    ) -> FollowUp | None:
        """A workspace admin or the channel's creator, taking part in it (or
        the operator), in a channel that isn't a DM."""
        stored = blockrules.follow_up_default_to_json(policy, self.deadline_bounds)
        async with self.db.tx(by) as conn:
            await self._channel_default(conn, by, channel_id, writing=True)
            await conn.execute(
                CHANNELS["set_channel_follow_up_default"],
                {"id": channel_id, "policy": None if stored is None else Jsonb(stored)},
            )
        return blockrules.follow_up_default_from_json(stored)

    async def _channel_default(
        self, conn: Conn, by: Actor | Operator, channel_id: uuid.UUID, *, writing: bool
    ) -> dict[str, Any]:
        if isinstance(by, Operator):
            cur = await conn.execute(CHANNELS["follow_up_default_for_operator"], {"id": channel_id})
        else:
            cur = await conn.execute(
                CHANNELS["follow_up_default_as_member"],
                {"id": channel_id, "actor": by.account_id},
            )
        row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no channel {channel_id}")
        if row["kind"] == ChannelKind.DM:
            raise InvalidArgument("a DM has no follow-up default; set the workspace's")
        if writing and not row["may"]:
            raise PermissionDenied(
                "only a workspace admin or the person who created the channel may set its "
                "follow-up default"
            )
        return dict(row)

    async def channel_workspace(self, channel_id: uuid.UUID) -> uuid.UUID:
        """For the operator: the workspace a channel belongs to."""
        async with self.db.maintenance() as conn:
            row = await (
                await conn.execute(CHANNELS["channel_workspace"], {"id": channel_id})
            ).fetchone()
        if row is None or row["workspace_id"] is None:
            raise NotFound(f"no channel {channel_id}")
        return row["workspace_id"]  # type: ignore[no-any-return]
