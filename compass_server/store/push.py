"""Each person's notification preferences and push subscriptions, and the
deployment's VAPID key pair (made once, its private key sealed with the
webhook key)."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from compass_server.notify.preferences import Preferences, resolved
from compass_server.store.db import Database, queries
from compass_server.store.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
)
from compass_server.store.types import AccountKind, Actor
from compass_server.store.vault import KeyProblem, Vault

PUSH = queries("push")

# The most push subscriptions (browsers) one person keeps.
SUBSCRIPTIONS_PER_PERSON = 10
# The longest push service URL taken.
MAX_ENDPOINT = 2048


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class PushStore:
    def __init__(
        self,
        db: Database,
        vault: Vault | None,
        defaults: Preferences,
        *,
        per_person: int = SUBSCRIPTIONS_PER_PERSON,
    ) -> None:
        self.db = db
        self.vault = vault
        self.defaults = defaults
        self.per_person = per_person
        self._key: tuple[str, str] | None = None

    @staticmethod
    def _person(by: Actor) -> None:
        if by.kind is not AccountKind.HUMAN:
            raise PermissionDenied("only a person has notification preferences")

    async def preferences(self, by: Actor) -> Preferences:
        self._person(by)
        async with self.db.tx(by) as conn:
            cur = await conn.execute(PUSH["get_preferences"], {"account_id": by.account_id})
            row = await cur.fetchone()
        return resolved(row, self.defaults)

    async def preferences_of(self, workspace_id: uuid.UUID, account_id: uuid.UUID) -> Preferences:
        """A person's preferences, for a sender about to tell them."""
        async with self.db.delivery_tx(workspace_id) as conn:
            cur = await conn.execute(PUSH["get_preferences"], {"account_id": account_id})
            row = await cur.fetchone()
        return resolved(row, self.defaults)

    async def slack_dm_available(self, by: Actor) -> bool:
        """Whether the person's Slack account is linked to their workspace's app."""
        self._person(by)
        async with self.db.tx(by) as conn:
            return await self._slack_dm_available(conn, by.account_id)

    @staticmethod
    async def _slack_dm_available(conn: Any, account_id: uuid.UUID) -> bool:
        cur = await conn.execute(PUSH["slack_dm_available"], {"account_id": account_id})
        row = await cur.fetchone()
        return bool(row and row["available"])

    async def set_preferences(self, by: Actor, prefs: Preferences) -> Preferences:
        self._person(by)
        async with self.db.tx(by) as conn:
            if prefs.slack_dm and not await self._slack_dm_available(conn, by.account_id):
                raise FailedPrecondition(
                    "a Slack direct message needs your workspace's Slack app connected and your "
                    "Slack account linked to Compass (link it under Notification settings, Slack)"
                )
            cur = await conn.execute(
                PUSH["set_preferences"],
                {
                    "account_id": by.account_id,
                    "email": prefs.email,
                    "page": prefs.page,
                    "push": prefs.push,
                    "quiet_start": prefs.quiet_start,
                    "quiet_end": prefs.quiet_end,
                    "time_zone": prefs.time_zone,
                    "slack_dm": prefs.slack_dm,
                },
            )
            if await cur.fetchone() is None:
                raise NotFound("your account is not in this workspace")
        return prefs

    async def add_subscription(
        self, by: Actor, endpoint: str, p256dh: str, auth: str
    ) -> dict[str, Any]:
        self._person(by)
        endpoint = endpoint.strip()
        # Browsers give https; the webhook sender's address checks apply either way.
        if not endpoint.startswith(("https://", "http://")) or len(endpoint) > MAX_ENDPOINT:
            raise InvalidArgument(
                f"endpoint is the push service's https:// URL, at most {MAX_ENDPOINT} characters"
            )
        try:
            key = _unb64(p256dh)
            secret = _unb64(auth)
        except ValueError:
            raise InvalidArgument("p256dh and auth are base64url, as browsers give them") from None
        if len(key) != 65 or key[0] != 4:
            raise InvalidArgument("p256dh is an uncompressed P-256 public key (65 bytes)")
        if len(secret) != 16:
            raise InvalidArgument("auth is the subscription's 16-byte secret")
        async with self.db.tx(by) as conn:
            cur = await conn.execute(
                PUSH["count_subscriptions"], {"account_id": by.account_id, "endpoint": endpoint}
            )
            row = await cur.fetchone()
            if row is not None and row["n"] >= self.per_person:
                raise ResourceExhausted(
                    f"a person keeps at most {self.per_person} push subscriptions; remove one first"
                )
            cur = await conn.execute(
                PUSH["add_subscription"],
                {
                    "id": uuid.uuid4(),
                    "workspace_id": by.workspace_id,
                    "account_id": by.account_id,
                    "endpoint": endpoint,
                    "p256dh": _b64(key),
                    "auth": _b64(secret),
                },
            )
            made = await cur.fetchone()
        assert made is not None
        return dict(made)

    async def remove_subscription(self, by: Actor, endpoint: str) -> bool:
        self._person(by)
        async with self.db.tx(by) as conn:
            cur = await conn.execute(
                PUSH["remove_subscription"],
                {"account_id": by.account_id, "endpoint": endpoint.strip()},
            )
            return await cur.fetchone() is not None

    async def subscription(
        self, workspace_id: uuid.UUID, subscription_id: uuid.UUID
    ) -> dict[str, Any] | None:
        async with self.db.delivery_tx(workspace_id) as conn:
            cur = await conn.execute(PUSH["subscription"], {"id": subscription_id})
            row = await cur.fetchone()
        return None if row is None else dict(row)

    async def drop_subscription(self, workspace_id: uuid.UUID, subscription_id: uuid.UUID) -> None:
        """The push service said the subscription is gone (404/410)."""
        async with self.db.delivery_tx(workspace_id) as conn:
            await conn.execute(PUSH["drop_subscription"], {"id": subscription_id})

    async def vapid_key(self) -> tuple[str, str]:
        """(private key PEM, public key base64url): made by the first server
        that asks, the same for every server after."""
        if self._key is not None:
            return self._key
        if self.vault is None:
            raise FailedPrecondition("this server cannot push: it has no webhook key")
        vault = self.vault
        async with self.db.maintenance() as conn:
            row = await self._read_key(conn)
            if row is None:
                private = ec.generate_private_key(ec.SECP256R1())
                pem = private.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                ).decode()
                public = private.public_key().public_bytes(
                    serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
                )
                key_id = uuid.uuid4()
                await conn.execute(
                    PUSH["make_vapid_key"],
                    {"id": key_id, "sealed": vault.seal(pem, key_id), "public": _b64(public)},
                )
                row = await self._read_key(conn)
            assert row is not None
        try:
            self._key = (vault.open(row["private_sealed"], row["id"]), row["public_key"])
        except KeyProblem:
            raise FailedPrecondition(
                "the push key was sealed with another webhook key; give every server the same "
                "COMPASS_WEBHOOK_KEY (or delete push_vapid_key's row and have people subscribe "
                "again)"
            ) from None
        return self._key

    @staticmethod
    async def _read_key(conn: Any) -> Any:
        cur = await conn.execute(PUSH["vapid_key"])
        return await cur.fetchone()
