"""Hook tokens and the requests held on their asks.

A hook token speaks for one agent and posts its harness's hook requests as
asks in one channel, under one policy; it signs in nowhere else (the
Authenticator refuses its kind on every other route). The asks themselves
are posted, answered and ended by the same store paths as every other ask.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass

from psycopg.types.json import Jsonb

from compass_server.hooks.policy import Draft, Policy
from compass_server.store.admin import (
    MAX_LABEL_CHARS,
    AdminStore,
    Asker,
    _lifetime,
    _text,
    hash_token,
    new_token,
)
from compass_server.store.db import Database, queries
from compass_server.store.errors import FailedPrecondition, NotFound
from compass_server.store.types import Actor, IssuedToken

HOOKS = queries("hooks")
ADMIN = queries("admin")


@dataclass(frozen=True, slots=True)
class Hook:
    """What a hook token's requests become: asks in this channel, under this policy."""

    channel_id: uuid.UUID
    policy: Policy


class HookStore:
    def __init__(self, db: Database, admin: AdminStore) -> None:
        self.db = db
        self.admin = admin

    async def create_hook_token(
        self,
        by: Asker,
        agent_id: uuid.UUID,
        channel_id: uuid.UUID,
        draft: Draft,
        label: str = "",
        expires_in: datetime.timedelta | None = None,
    ) -> tuple[IssuedToken, Policy]:
        """A token the agent's hooks post asks with in the channel, under the
        policy (its people looked up now); an admin's, or the operator's."""
        _text(label, "a token label", MAX_LABEL_CHARS, required=False)
        _lifetime(expires_in, "a token's expiry")
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            cur = await conn.execute(
                HOOKS["humans_by_handle"], {"handles": sorted(draft.handles())}
            )
            policy = draft.resolve({r["handle"]: r["id"] for r in await cur.fetchall()})
            secret = new_token("cph")
            token_id = uuid.uuid4()
            row = await (
                await conn.execute(
                    HOOKS["issue"],
                    {
                        "token_hash": hash_token(secret),
                        "id": token_id,
                        "agent_id": agent_id,
                        "channel_id": channel_id,
                        "policy": Jsonb(policy.to_json()),
                        "label": label,
                        "expires_in": expires_in,
                    },
                )
            ).fetchone()
            issued = row["issued"] if row else None
            if issued == "no_agent":
                raise NotFound(f"no agent {agent_id}")
            if issued == "no_channel":
                raise NotFound(f"no channel {channel_id}")
            if issued == "not_in_channel":
                raise FailedPrecondition(
                    f"agent {agent_id} takes no part in channel {channel_id}; add it first"
                )
            token = await self.admin._get_token(conn, token_id)
        return IssuedToken(secret, token), policy

    async def hook_of(self, actor: Actor, token_id: uuid.UUID) -> Hook:
        """The hook token's channel and policy."""
        async with self.db.tx(actor) as conn:
            row = await (await conn.execute(HOOKS["hook_of"], {"token_id": token_id})).fetchone()
        if row is None:
            raise NotFound("this token is no hook token")
        return Hook(row["channel_id"], Policy.from_json(row["policy"]))

    async def hold(self, actor: Actor, ask_id: str) -> int:
        """One more held request waits on the ask; how many now do."""
        async with self.db.tx(actor) as conn:
            row = await (await conn.execute(HOOKS["hold"], {"ask_id": ask_id})).fetchone()
        return int(row["holders"]) if row else 0

    async def release(self, actor: Actor, ask_id: str) -> int:
        """One held request left the ask; how many still wait on it."""
        async with self.db.tx(actor) as conn:
            row = await (await conn.execute(HOOKS["release"], {"ask_id": ask_id})).fetchone()
            left = int(row["holders"]) if row else 0
            if row is not None and left == 0:
                await conn.execute(HOOKS["forget"], {"ask_id": ask_id})
        return left
