"""Links that open one ask for one person. Mixed into Store.

A link is a credential of kind `link`: a random secret (stored as its
digest) bound to (ask, account), living at most its lifetime, revocable like
a token. It signs nothing in over `authorization: Bearer`; only the link's
own page takes it, and that page reads and ends its one ask and nothing else.
Opening it marks nothing (mail scanners fetch links); the ask's own rules
refuse an answer once the ask has ended, and the page then shows how.

Surfaces that notify a person (chat, email, push) call `mint_ask_link` as
they send: for an ask that names its answerers only to a named person, for
one that names nobody only to a person in its channel, the one being
notified. Webhook payloads never carry a link: a receiver is not the person.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

from compass_server.store.admin import AdminStore, Asker, hash_token, new_token
from compass_server.store.db import Database, queries
from compass_server.store.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    quoted,
)
from compass_server.store.types import AccountKind, Actor, Operator

LINKS = queries("links")

# How long a link opens its ask at most, unless the server's setting says.
LINK_LIFETIME = datetime.timedelta(days=7)
# The link an answer from a chat or a mail reply runs through lives this long.
ACTING_LINK = datetime.timedelta(minutes=5)
MAX_LINKS_LISTED = 200


@dataclasses.dataclass(frozen=True, slots=True)
class AskLink:
    link_id: uuid.UUID
    account_id: uuid.UUID
    ask_id: str
    created_at: datetime.datetime
    expires_at: datetime.datetime
    revoked_at: datetime.datetime | None


@dataclasses.dataclass(frozen=True, slots=True)
class MintedLink:
    link: AskLink
    # Shown once, in the notification; stored as its digest.
    secret: str


@dataclasses.dataclass(frozen=True, slots=True)
class LinkPass:
    """An open link: its ask, and the person it acts as (through its own
    credential, so the database holds it like any call)."""

    link_id: uuid.UUID
    ask_id: str
    actor: Actor


class LinkClosed(Exception):
    """The link opens nothing: `why` is unknown, revoked, expired or deactivated."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


_MINT_REFUSALS: dict[str, Exception] = {
    "no_ask": NotFound("no such ask in this workspace"),
    "ended": FailedPrecondition("the ask has ended; a link to it would open nothing"),
    "no_person": NotFound("no such person (active, not an agent) in this workspace"),
    "not_named": PermissionDenied(
        "that person may not answer this ask: it names other answerers, or they aren't "
        "in its channel"
    ),
}


def _link(row: dict[str, Any]) -> AskLink:
    return AskLink(
        row["id"],
        row["account_id"],
        row["ask_id"],
        row["created_at"],
        row["expires_at"],
        row["revoked_at"],
    )


class AskLinks:
    """One-ask links. Mixed into Store."""

    db: Database
    admin: AdminStore
    link_lifetime: datetime.timedelta = LINK_LIFETIME

    async def mint_ask_link(
        self,
        workspace_id: uuid.UUID,
        ask_id: str,
        account_id: uuid.UUID,
        lifetime: datetime.timedelta | None = None,
    ) -> MintedLink:
        """A link for a notification to `account_id` about `ask_id`, living
        `lifetime` (at most the server's link lifetime). Refused (nothing
        made) unless the ask is open and the person may answer it."""
        most = self.link_lifetime
        lifetime = most if lifetime is None else lifetime
        if lifetime <= datetime.timedelta(0) or lifetime > most:
            raise InvalidArgument(f"a link lives more than 0 s and at most {most}")
        if not ask_id:
            raise InvalidArgument("ask_id is required")
        secret = new_token("cpl")
        link_id = uuid.uuid4()
        async with self.db.tx(Operator(workspace_id)) as conn:
            cur = await conn.execute(
                LINKS["mint_link"],
                {
                    "workspace_id": workspace_id,
                    "ask_id": ask_id,
                    "account_id": account_id,
                    "token_hash": hash_token(secret),
                    "id": link_id,
                    "lifetime": lifetime,
                },
            )
            row = await cur.fetchone()
            outcome = row["outcome"] if row else "no_ask"
            if outcome != "minted":
                raise _MINT_REFUSALS[outcome]
            found = await (await conn.execute(LINKS["get_link"], {"id": link_id})).fetchone()
        assert found is not None
        return MintedLink(_link(found), secret)

    async def act_on_ask(
        self, workspace_id: uuid.UUID, ask_id: str, account_id: uuid.UUID
    ) -> Actor:
        """The person, acting on this one ask alone (a surface that answers
        for them: Slack, a mail reply), through a link minted for it: the
        link's refusals are theirs (FailedPrecondition when the ask has
        ended, PermissionDenied when it isn't theirs to answer, NotFound)."""
        minted = await self.mint_ask_link(workspace_id, ask_id, account_id, ACTING_LINK)
        return Actor(workspace_id, account_id, AccountKind.HUMAN, hash_token(minted.secret))

    async def open_ask_link(self, secret: str) -> LinkPass:
        """The ask and person of a link that still opens; LinkClosed else.
        Writes nothing."""
        async with self.db.connection() as conn:
            cur = await conn.execute(LINKS["open_link"], {"token_hash": hash_token(secret)})
            row = await cur.fetchone()
        if row is None:
            raise LinkClosed("unknown")
        for why in ("revoked", "deactivated", "expired"):
            if row[why]:
                raise LinkClosed(why)
        actor = Actor(row["workspace_id"], row["account_id"], AccountKind.HUMAN, hash_token(secret))
        return LinkPass(row["link_id"], row["ask_id"], actor)

    async def list_ask_links(
        self, by: Asker, *, ask_id: str | None = None, account_id: uuid.UUID | None = None
    ) -> list[AskLink]:
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            cur = await conn.execute(
                LINKS["list_links"],
                {"ask_id": ask_id, "account_id": account_id, "limit": MAX_LINKS_LISTED},
            )
            return [_link(r) for r in await cur.fetchall()]

    async def revoke_ask_link(self, by: Asker, link_id: uuid.UUID) -> AskLink:
        """The link opens nothing from now on, on every server."""
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            if await (await conn.execute(LINKS["get_link"], {"id": link_id})).fetchone() is None:
                raise NotFound(f"no link {quoted(str(link_id))}")
            cur = await conn.execute(LINKS["revoke_link"], {"id": link_id})
            seq = (
                await self.admin._notify_revoked(conn, link_id)
                if await cur.fetchone() is not None
                else None
            )
            found = await (await conn.execute(LINKS["get_link"], {"id": link_id})).fetchone()
        if seq is not None:
            await self.admin._wait_applied(seq)
        assert found is not None
        return _link(found)
