"""A workspace's Slack app: connecting and disconnecting it, its channel
maps, the message each ask was posted as, and the Slack users linked to
accounts (migration 0030 says how it rides on the webhook courier).

Admins (and the operator) manage the app in their own workspace. The
courier's sends and Slack's interactions run as compass_maintenance held to
the app's workspace.
"""

from __future__ import annotations

import dataclasses
import datetime
import secrets
import uuid
from collections.abc import Mapping
from typing import Any

from compass_server.store.admin import AdminStore, Asker, hash_token, new_token
from compass_server.store.db import Database, queries
from compass_server.store.errors import (
    Conflict,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    quoted,
)
from compass_server.store.types import AccountKind, Actor, Operator, WebhookEventType
from compass_server.store.vault import KeyProblem, Vault
from compass_server.store.webhooks import NO_KEY

SLACK = queries("slack")
ADMIN = queries("admin")

# Channels one app may map.
MAX_CHANNELS = 200
MAX_TEXT = 200
# A person's one-time code for Slack: letters and digits nobody misreads.
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
# How long an interaction is remembered, so Slack's retries are seen once.
SEEN_FOR = datetime.timedelta(hours=1)

APP_EVENTS = (
    WebhookEventType.ASK_POSTED,
    WebhookEventType.ASK_ANSWERED,
    WebhookEventType.ASK_DECLINED,
    WebhookEventType.ASK_WITHDRAWN,
    WebhookEventType.ASK_EXPIRED,
)


@dataclasses.dataclass(frozen=True, slots=True)
class SlackApp:
    app_id: uuid.UUID
    team_id: str
    email_match: bool
    enabled: bool
    disabled_reason: str
    created_at: datetime.datetime
    # Deliveries still owed and those that failed for good, and the latest error.
    pending: int
    failed: int
    last_error: str
    # Compass channel id → Slack channel id.
    channels: dict[uuid.UUID, str]


@dataclasses.dataclass(frozen=True, slots=True)
class AppKeys:
    """An app as an interaction finds it by its team."""

    workspace_id: uuid.UUID
    app_id: uuid.UUID
    team_id: str
    token: str
    signing_secret: str
    email_match: bool
    enabled: bool


@dataclasses.dataclass(frozen=True, slots=True)
class Posted:
    slack_channel: str
    ts: str
    ended: bool


def _app(row: Mapping[str, Any]) -> SlackApp:
    channels = {}
    for pair in row["channels"]:
        channel_id, _, slack_channel = pair.partition("=")
        channels[uuid.UUID(channel_id)] = slack_channel
    return SlackApp(
        row["id"],
        row["slack_team_id"],
        row["slack_email_match"],
        row["enabled"],
        row["disabled_reason"],
        row["created_at"],
        int(row["pending"]),
        int(row["failed"]),
        row["last_error"] or "",
        channels,
    )


def normal_code(text: str) -> str | None:
    """A person's code as typed (any case, spaces or a dash between its
    halves), or None when it can't be one."""
    code = "".join(text.split()).replace("-", "").upper()
    if len(code) != CODE_LENGTH or any(c not in CODE_ALPHABET for c in code):
        return None
    return code


def _slack_id(value: str, what: str) -> str:
    """A Slack id (team, channel, user): letters and digits, as Slack makes them."""
    value = value.strip()
    if not value or len(value) > 32 or not value.isalnum() or not value.isascii():
        raise InvalidArgument(f"{what} {quoted(value[:40])} is not a Slack id (like T0123ABCD)")
    return value


class SlackStore:
    def __init__(self, db: Database, admin: AdminStore, vault: Vault | None) -> None:
        self.db = db
        self.admin = admin
        self.vault = vault

    def keyed(self) -> Vault:
        if self.vault is None:
            raise FailedPrecondition(NO_KEY.replace("a webhook's secret", "a Slack app's tokens"))
        return self.vault

    # --- an admin's app ---------------------------------------------------------------------

    async def connect(
        self, by: Asker, team_id: str, bot_token: str, signing_secret: str, email_match: bool
    ) -> SlackApp:
        team_id = _slack_id(team_id, "team_id")
        if not bot_token.startswith("xoxb-") or len(bot_token) > MAX_TEXT:
            raise InvalidArgument("bot_token must be the app's bot token (it starts with xoxb-)")
        if not signing_secret or len(signing_secret) > MAX_TEXT or not signing_secret.isalnum():
            raise InvalidArgument("signing_secret must be the app's signing secret")
        vault = self.keyed()
        app_id = uuid.uuid4()
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            if await (await conn.execute(ADMIN["lock_workspace"])).fetchone() is None:
                raise NotFound(f"no workspace {by.workspace_id}")
            cur = await conn.execute(
                SLACK["insert_app"],
                {
                    "id": app_id,
                    "token_sealed": vault.seal(bot_token, app_id),
                    "secret_sealed": vault.seal(signing_secret, app_id),
                    "shown": f"slack team {team_id}",
                    "event_types": [t.value for t in APP_EVENTS],
                    "team_id": team_id,
                    "email_match": email_match,
                },
            )
            if await cur.fetchone() is None:
                raise Conflict(f"a Slack app of team {team_id} is already connected")
            return await self._get(conn, app_id)

    async def _get(self, conn: Any, app_id: uuid.UUID) -> SlackApp:
        row = await (await conn.execute(SLACK["list_apps"], {"id": app_id})).fetchone()
        if row is None:
            raise NotFound(f"no Slack app {app_id}")
        return _app(row)

    async def list_apps(self, by: Asker) -> list[SlackApp]:
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            cur = await conn.execute(SLACK["list_apps"], {"id": None})
            return [_app(r) for r in await cur.fetchall()]

    async def disconnect(self, by: Asker, app_id: uuid.UUID) -> None:
        """The app goes, with its channel maps and its deliveries."""
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            if await (await conn.execute(SLACK["delete_app"], {"id": app_id})).fetchone() is None:
                raise NotFound(f"no Slack app {app_id}")

    async def map_channel(
        self, by: Asker, app_id: uuid.UUID, channel_id: uuid.UUID, slack_channel: str
    ) -> SlackApp:
        """Asks posted in the channel go to the Slack channel (mapping again moves them)."""
        slack_channel = _slack_id(slack_channel, "slack_channel")
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            if await (await conn.execute(SLACK["lock_app"], {"id": app_id})).fetchone() is None:
                raise NotFound(f"no Slack app {app_id}")
            row = await (await conn.execute(SLACK["count_channels"], {"id": app_id})).fetchone()
            if row is not None and row["n"] >= MAX_CHANNELS:
                raise FailedPrecondition(
                    f"this Slack app maps {row['n']} channels, the most it may; unmap one first"
                )
            cur = await conn.execute(
                SLACK["map_channel"],
                {"id": app_id, "channel_id": channel_id, "slack_channel": slack_channel},
            )
            if await cur.fetchone() is None:
                raise NotFound(f"no channel {channel_id} (a DM can't be mapped)")
            return await self._get(conn, app_id)

    async def unmap_channel(self, by: Asker, app_id: uuid.UUID, channel_id: uuid.UUID) -> SlackApp:
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            cur = await conn.execute(
                SLACK["unmap_channel"], {"id": app_id, "channel_id": channel_id}
            )
            if await cur.fetchone() is None:
                raise NotFound(f"channel {channel_id} is not mapped by Slack app {app_id}")
            return await self._get(conn, app_id)

    # --- the courier's side -----------------------------------------------------------------

    async def posted(
        self, workspace_id: uuid.UUID, app_id: uuid.UUID, ask_id: str, channel_id: uuid.UUID
    ) -> tuple[Posted | None, str | None, bool]:
        """The ask's Slack message, if posted; the Slack channel its Compass
        channel maps to, if any; and whether its post is still to be sent."""
        async with self.db.delivery_tx(workspace_id) as conn:
            row = await (
                await conn.execute(SLACK["get_message"], {"id": app_id, "ask_id": ask_id})
            ).fetchone()
            target = await (
                await conn.execute(SLACK["target"], {"id": app_id, "channel_id": channel_id})
            ).fetchone()
            waiting = False
            if row is None:
                found = await (
                    await conn.execute(SLACK["post_waiting"], {"id": app_id, "ask_id": ask_id})
                ).fetchone()
                waiting = bool(found and found["waiting"])
        posted = None if row is None else Posted(row["slack_channel"], row["ts"], row["ended"])
        return posted, None if target is None else str(target["slack_channel"]), waiting

    async def record_post(
        self, workspace_id: uuid.UUID, app_id: uuid.UUID, ask_id: str, posted: Posted
    ) -> None:
        async with self.db.delivery_tx(workspace_id) as conn:
            await conn.execute(
                SLACK["insert_message"],
                {
                    "id": app_id,
                    "ask_id": ask_id,
                    "slack_channel": posted.slack_channel,
                    "ts": posted.ts,
                },
            )

    async def record_ended(self, workspace_id: uuid.UUID, app_id: uuid.UUID, ask_id: str) -> None:
        async with self.db.delivery_tx(workspace_id) as conn:
            await conn.execute(SLACK["end_message"], {"id": app_id, "ask_id": ask_id})

    async def record_direct(
        self, workspace_id: uuid.UUID, app_id: uuid.UUID, ask_id: str, posted: Posted
    ) -> None:
        async with self.db.delivery_tx(workspace_id) as conn:
            await conn.execute(
                SLACK["insert_direct"],
                {
                    "id": app_id,
                    "ask_id": ask_id,
                    "slack_channel": posted.slack_channel,
                    "ts": posted.ts,
                },
            )

    async def open_directs(
        self, workspace_id: uuid.UUID, app_id: uuid.UUID, ask_id: str
    ) -> list[Posted]:
        """The ask's direct messages that don't show its ending yet."""
        async with self.db.delivery_tx(workspace_id) as conn:
            cur = await conn.execute(SLACK["open_directs"], {"id": app_id, "ask_id": ask_id})
            return [Posted(r["slack_channel"], r["ts"], False) for r in await cur.fetchall()]

    async def record_direct_ended(
        self, workspace_id: uuid.UUID, app_id: uuid.UUID, ask_id: str, posted: Posted
    ) -> None:
        async with self.db.delivery_tx(workspace_id) as conn:
            await conn.execute(
                SLACK["end_direct"],
                {
                    "id": app_id,
                    "ask_id": ask_id,
                    "slack_channel": posted.slack_channel,
                    "ts": posted.ts,
                },
            )

    # --- Slack's interactions ---------------------------------------------------------------

    async def app_for_team(self, team_id: str) -> AppKeys | None:
        """The app of a Slack team, its secrets opened; None when none is
        connected (or this server can't open them)."""
        async with self.db.deliveries() as conn:
            row = await (await conn.execute(SLACK["app_for_team"], {"team": team_id})).fetchone()
        if row is None or self.vault is None:
            return None
        app_id = row["endpoint_id"]
        try:
            token = self.vault.open(row["token_sealed"], app_id)
            secret = self.vault.open(row["secret_sealed"], app_id)
        except KeyProblem:
            return None
        return AppKeys(
            row["workspace_id"], app_id, team_id, token, secret, row["email_match"], row["enabled"]
        )

    async def first_time(
        self, workspace_id: uuid.UUID, key: str, team_id: str, user: str
    ) -> tuple[bool, tuple[uuid.UUID, str] | None]:
        """Whether this is the first time for `key` (a retried interaction is
        recognised), and the account the Slack user is linked to, with its
        handle: one transaction for both."""
        async with self.db.delivery_tx(workspace_id) as conn:
            row = await (await conn.execute(SLACK["seen"], {"key": key[:300]})).fetchone()
            if row is None:
                return False, None
            if secrets.randbelow(64) == 0:
                await conn.execute(SLACK["prune"], {"age": SEEN_FOR})
            found = await (
                await conn.execute(SLACK["linked_account"], {"team": team_id, "user": user})
            ).fetchone()
        return True, None if found is None else (found["id"], found["handle"])

    async def linked(
        self, workspace_id: uuid.UUID, team_id: str, user: str
    ) -> tuple[uuid.UUID, str] | None:
        """The account a Slack user is linked to, and its handle."""
        async with self.db.delivery_tx(workspace_id) as conn:
            row = await (
                await conn.execute(SLACK["linked_account"], {"team": team_id, "user": user})
            ).fetchone()
        return None if row is None else (row["id"], row["handle"])

    async def link_by_email(
        self, workspace_id: uuid.UUID, team_id: str, user: str, email: str
    ) -> tuple[uuid.UUID, str] | None:
        """Links the Slack user to the person with that (verified) email, if any."""
        async with self.db.delivery_tx(workspace_id) as conn:
            row = await (await conn.execute(SLACK["account_by_email"], {"email": email})).fetchone()
            if row is None:
                return None
            await conn.execute(
                SLACK["link_person"],
                {"team": team_id, "user": user, "account_id": row["id"], "how": "email"},
            )
        return row["id"], row["handle"]

    async def link_code(
        self, workspace_id: uuid.UUID, team_id: str, user: str, lifetime: datetime.timedelta
    ) -> str:
        """A one-use code that links the Slack user to whoever opens it signed in."""
        code = new_token("csl")
        async with self.db.delivery_tx(workspace_id) as conn:
            await conn.execute(
                SLACK["insert_code"],
                {
                    "code_hash": hash_token(code),
                    "team": team_id,
                    "user": user,
                    "lifetime": lifetime,
                },
            )
        return code

    async def redeem_code(self, by: Asker, account_id: uuid.UUID, code: str) -> str | None:
        """Links the code's Slack user to `account_id` (signed in as `by`);
        the Slack user id, or None when the code is unknown, used or expired."""
        async with self.db.tx(Operator(by.workspace_id)) as conn:
            row = await (
                await conn.execute(SLACK["take_code"], {"code_hash": hash_token(code)})
            ).fetchone()
            if row is None or not row["fresh"]:
                return None
            await conn.execute(
                SLACK["link_person"],
                {
                    "team": row["team_id"],
                    "user": row["slack_user_id"],
                    "account_id": account_id,
                    "how": "link",
                },
            )
        return str(row["slack_user_id"])

    async def person_code(self, actor: Actor, lifetime: datetime.timedelta) -> str:
        """A one-time code that links the Slack user who types it in Slack to
        `actor`'s person: short to type, used once, living `lifetime`."""
        if actor.kind is not AccountKind.HUMAN:
            raise PermissionDenied("only a person links a Slack account")
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        async with self.db.tx(actor) as conn:
            if not await self._connected(conn):
                raise FailedPrecondition(
                    "your workspace has no Slack app connected; an admin connects one first"
                )
            if secrets.randbelow(16) == 0:
                await conn.execute(SLACK["prune_person_codes"])
            await conn.execute(
                SLACK["insert_person_code"],
                {
                    "code_hash": hash_token(code),
                    "account_id": actor.account_id,
                    "lifetime": lifetime,
                },
            )
        return code

    async def app_connected(self, actor: Actor) -> bool:
        """Whether the person's workspace has a Slack app connected."""
        async with self.db.tx(actor) as conn:
            return await self._connected(conn)

    @staticmethod
    async def _connected(conn: Any) -> bool:
        row = await (await conn.execute(SLACK["app_connected"])).fetchone()
        return bool(row and row["connected"])

    async def redeem_person_code(
        self, workspace_id: uuid.UUID, team_id: str, user: str, code: str
    ) -> tuple[uuid.UUID, str] | None:
        """Links the Slack user to the person the code was made for (its
        account and handle); None when the code is unknown, used or expired."""
        typed = normal_code(code)
        if typed is None:
            return None
        async with self.db.delivery_tx(workspace_id) as conn:
            row = await (
                await conn.execute(SLACK["take_person_code"], {"code_hash": hash_token(typed)})
            ).fetchone()
            if row is None or not row["fresh"]:
                return None
            await conn.execute(
                SLACK["link_person"],
                {"team": team_id, "user": user, "account_id": row["account_id"], "how": "code"},
            )
            person = await (
                await conn.execute(SLACK["linked_account"], {"team": team_id, "user": user})
            ).fetchone()
        return None if person is None else (person["id"], person["handle"])

    async def ending_of(self, workspace_id: uuid.UUID, ask_id: str) -> tuple[str, str, str] | None:
        """(kind, reason, handle) of the ask's ending; None while it is open."""
        async with self.db.deliveries() as conn:
            cur = await conn.execute(
                SLACK["ending_of"], {"workspace_id": workspace_id, "ask_id": ask_id}
            )
            row = await cur.fetchone()
        return None if row is None else (row["kind"], row["reason"], row["handle"] or "")

    async def answerers_of(self, workspace_id: uuid.UUID, ask_id: str) -> list[str]:
        async with self.db.deliveries() as conn:
            cur = await conn.execute(
                SLACK["answerers_of"], {"workspace_id": workspace_id, "ask_id": ask_id}
            )
            return [r["handle"] for r in await cur.fetchall()]
