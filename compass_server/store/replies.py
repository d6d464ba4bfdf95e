"""Reply addresses of mails about asks. Mixed into Store.

A mail about an ask carries a reply address of its own (ask+TOKEN@domain):
the token is the server key's MAC of (workspace, ask, person), so it is the
same on every attempt of that mail and names no id anyone could guess; it is
kept as its digest, and a reply's token finds whom and what it answers.
Answering still goes through the ask's rules as that person (a one-ask
link minted at that moment), so an address of an ended ask answers nothing.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import re
import uuid
from typing import TYPE_CHECKING

from compass_server.store.admin import hash_token
from compass_server.store.db import Database, queries

REPLIES = queries("replies")

# A token as the server makes them: 15 bytes of MAC in lower-case base32,
# so it survives mail systems that fold an address's case.
TOKEN_SHAPE = re.compile(r"[a-z2-7]{24}")
_LABEL = b"compass mail reply address\x00"


@dataclasses.dataclass(frozen=True, slots=True)
class ReplyHolder:
    """Whom a reply address answers as, and which ask."""

    workspace_id: uuid.UUID
    ask_id: str
    account_id: uuid.UUID
    email: str
    handle: str


class MailReplies:
    """Mixed into Store."""

    db: Database
    _reply_key: bytes | None = None

    if TYPE_CHECKING:
        # Store's People mixin has it; declared here for the type checker only.
        async def signin_key(self) -> bytes: ...

    async def _key(self) -> bytes:
        # Derived from the deployment's key, which every server shares.
        if self._reply_key is None:
            self._reply_key = hmac.new(await self.signin_key(), _LABEL, hashlib.sha256).digest()
        return self._reply_key

    async def mail_reply_token(
        self, workspace_id: uuid.UUID, ask_id: str, account_id: uuid.UUID
    ) -> str:
        """The token of the reply address of `account_id`'s mail about `ask_id`."""
        mac = hmac.new(
            await self._key(), f"{workspace_id}|{ask_id}|{account_id}".encode(), hashlib.sha256
        ).digest()
        token = base64.b32encode(mac[:15]).decode().lower()
        async with self.db.delivery_tx(workspace_id) as conn:
            await conn.execute(
                REPLIES["insert_reply"],
                {"token_hash": hash_token(token), "ask_id": ask_id, "account_id": account_id},
            )
        return token

    async def mail_reply_holder(self, token: str) -> ReplyHolder | None:
        """Whom the address of `token` answers as; None for one the server
        never sent (or whose person is deactivated)."""
        if not TOKEN_SHAPE.fullmatch(token):
            return None
        async with self.db.deliveries() as conn:
            row = await (
                await conn.execute(REPLIES["reply_holder"], {"token_hash": hash_token(token)})
            ).fetchone()
        if row is None:
            return None
        holder = ReplyHolder(
            row["workspace_id"], row["ask_id"], row["account_id"], row["email"] or "", row["handle"]
        )
        # The row must be one this server's key signed (not one written by hand).
        mac = hmac.new(
            await self._key(),
            f"{holder.workspace_id}|{holder.ask_id}|{holder.account_id}".encode(),
            hashlib.sha256,
        ).digest()
        if not hmac.compare_digest(base64.b32encode(mac[:15]).decode().lower(), token):
            return None
        return holder
