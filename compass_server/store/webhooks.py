"""A workspace's webhook endpoints, the deliveries made for them, and every
attempt to send one (migration 0016 says how they fit the event log).

Admins (and the operator) manage endpoints and read deliveries in their own
workspace. The servers' work across workspaces runs as compass_maintenance on
a pool of its own: making deliveries from the log (one transaction per
endpoint, holding its row), claiming due ones with a lease, and recording
each attempt.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from compass_server.store import blocks as blockrules
from compass_server.store.admin import AdminStore, Asker
from compass_server.store.db import Database, queries
from compass_server.store.errors import FailedPrecondition, InvalidArgument, NotFound, quoted
from compass_server.store.events import EVENT_PAGE_BYTES, EVENTS, event_from_row
from compass_server.store.inbox import blocks_as_read
from compass_server.store.pages import decode_token, encode_token, page_size
from compass_server.store.types import (
    Ask,
    AskStatus,
    AttemptResult,
    ChannelKind,
    ClaimedDelivery,
    DeliveryDraft,
    DeliveryState,
    Directory,
    Event,
    InboxItemView,
    NewWebhook,
    Page,
    Webhook,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEventType,
    WebhookKind,
)
from compass_server.store.vault import KeyProblem, Vault
from compass_server.webhooks.signing import new_secret

WEBHOOKS = queries("webhooks")
PUSH = queries("push")
ADMIN = queries("admin")

# Endpoints one workspace may have.
MAX_WEBHOOKS = 50
MAX_SECRET_GRACE = datetime.timedelta(days=7)
# Events one transaction turns into deliveries for one endpoint.
FAN_OUT_BATCH = 500

NO_KEY = (
    "this server has no webhook key, so it can't keep a webhook's secret: set "
    "COMPASS_WEBHOOK_KEY (or COMPASS_WEBHOOK_KEY_FILE) on every server"
)

_EPOCH = datetime.datetime.min.replace(tzinfo=datetime.UTC)
_END = datetime.datetime.max.replace(tzinfo=datetime.UTC)

# What makes the deliveries of one endpoint from a page of its log.
Derive = Callable[
    [WebhookKind, frozenset[WebhookEventType], Sequence[Event], Directory], list[DeliveryDraft]
]


def event_types(names: Iterable[str]) -> tuple[WebhookEventType, ...]:
    """Event types by name, each once; INVALID_ARGUMENT naming an unknown one."""
    out: list[WebhookEventType] = []
    for name in names:
        try:
            kind = WebhookEventType(name.strip())
        except ValueError:
            known = ", ".join(t.value for t in WebhookEventType)
            raise InvalidArgument(
                f"no webhook event type {quoted(name)}; the types are: {known}"
            ) from None
        if kind not in out:
            out.append(kind)
    return tuple(out)


def _webhook(row: Mapping[str, Any]) -> Webhook:
    return Webhook(
        webhook_id=row["id"],
        workspace_id=row["workspace_id"],
        kind=WebhookKind(row["kind"]),
        url_shown=row["url_shown"],
        event_types=tuple(WebhookEventType(t) for t in row["event_types"]),
        enabled=row["enabled"],
        disabled_reason=row["disabled_reason"],
        disabled_at=row["disabled_at"],
        created_at=row["created_at"],
        previous_secret_until=row["previous_until"],
        pending=row["pending"],
        failed=row["failed"],
    )


def _delivery(row: Mapping[str, Any]) -> WebhookDelivery:
    state = DeliveryState(row["state"])
    return WebhookDelivery(
        delivery_id=row["id"],
        webhook_id=row["endpoint_id"],
        event_id=row["event_id"],
        event_type=WebhookEventType(row["event_type"]),
        subject=row["subject"],
        state=state,
        attempts=row["attempts"],
        next_attempt_at=row["next_attempt_at"] if state is DeliveryState.PENDING else None,
        created_at=row["created_at"],
        finished_at=row["finished_at"],
        last_status_code=row["status_code"],
        last_error=row["error"] or "",
    )


def _attempt(row: Mapping[str, Any]) -> WebhookAttempt:
    return WebhookAttempt(
        n=row["n"],
        server_id=row["server_id"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        status_code=row["status_code"],
        latency_ms=row["latency_ms"],
        error=row["error"],
        response=row["response"],
    )


def _item_view(row: Mapping[str, Any]) -> InboxItemView:
    status = AskStatus(row["ask_status"]) if row["ask_status"] else None
    ask: Ask | None = None
    if row["blocks"] is not None:
        blocks = blocks_as_read(
            blockrules.blocks_from_json(row["blocks"]), status, row["ending"], row["reason"]
        )
        ask = next((b for b in blocks if isinstance(b, Ask)), None)
    return InboxItemView(row["id"], row["key"], row["title"], ask, status, row["reason"])


def _named(events: Sequence[Event]) -> tuple[set[uuid.UUID], set[uuid.UUID], set[uuid.UUID]]:
    """The channels, accounts and inbox items a page of events refers to."""
    channels: set[uuid.UUID] = set()
    accounts: set[uuid.UUID] = set()
    items: set[uuid.UUID] = set()
    for e in events:
        if e.message is not None:
            channels.add(e.message.channel_id)
            # The people follow-up steps reached are named by handle.
            for b in e.message.blocks:
                if isinstance(b, Ask):
                    for step in b.follow_up_steps:
                        accounts.update(step.account_ids)
        if e.inbox is not None:
            accounts.update((e.inbox.agent_id, e.inbox.actor_id))
            items.add(e.inbox.item_id)
    return channels, accounts, items


class WebhookStore:
    def __init__(self, db: Database, admin: AdminStore, vault: Vault | None) -> None:
        self.db = db
        self.admin = admin
        self.vault = vault

    def keyed(self) -> Vault:
        """The vault; FAILED_PRECONDITION when this server has no webhook key."""
        if self.vault is None:
            raise FailedPrecondition(NO_KEY)
        return self.vault

    # --- an admin's endpoints ----------------------------------------------------------

    async def admit(self, by: Asker) -> None:
        """PERMISSION_DENIED unless `by` is an admin (or the operator)."""
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)

    async def create(
        self,
        by: Asker,
        kind: WebhookKind,
        url: str,
        url_shown: str,
        types: Sequence[WebhookEventType] = (),
    ) -> NewWebhook:
        """An endpoint of the caller's workspace, and its signing secret
        (shown this once). `url` was checked by the caller."""
        vault = self.keyed()
        webhook_id = uuid.uuid4()
        secret = new_secret()
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            if await (await conn.execute(ADMIN["lock_workspace"])).fetchone() is None:
                raise NotFound(f"no workspace {by.workspace_id}")
            row = await (await conn.execute(WEBHOOKS["count_webhooks"])).fetchone()
            if row is not None and row["n"] >= MAX_WEBHOOKS:
                raise FailedPrecondition(
                    f"this workspace has {row['n']} webhooks, the most it may; delete one first"
                )
            await conn.execute(
                WEBHOOKS["insert_webhook"],
                {
                    "id": webhook_id,
                    "kind": kind.value,
                    "url_sealed": vault.seal(url, webhook_id),
                    "url_shown": url_shown,
                    "event_types": [t.value for t in types],
                    "secret_sealed": vault.seal(secret, webhook_id),
                },
            )
            webhook = await self._get(conn, webhook_id)
        return NewWebhook(webhook, secret)

    async def _get(self, conn: Any, webhook_id: uuid.UUID) -> Webhook:
        row = await (await conn.execute(WEBHOOKS["get_webhook"], {"id": webhook_id})).fetchone()
        if row is None:
            raise NotFound(f"no webhook {webhook_id}")
        return _webhook(row)

    async def get(self, by: Asker, webhook_id: uuid.UUID) -> Webhook:
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            return await self._get(conn, webhook_id)

    async def list_webhooks(self, by: Asker, size: int, page_token: str) -> Page[Webhook]:
        limit = page_size(size)
        after = _after(page_token) if page_token else (_EPOCH, uuid.UUID(int=0))
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            cur = await conn.execute(
                WEBHOOKS["list_webhooks"],
                {"after_created": after[0], "after_id": after[1], "limit": limit + 1},
            )
            items = [_webhook(r) for r in await cur.fetchall()]
        if len(items) <= limit:
            return Page(items)
        last = items[limit - 1]
        return Page(items[:limit], encode_token(last.created_at.isoformat(), last.webhook_id))

    async def set_enabled(self, by: Asker, webhook_id: uuid.UUID, enabled: bool) -> Webhook:
        """Turns the endpoint on or off; doing it twice changes nothing. Off,
        it gets no deliveries (those made before wait); on again, it takes
        the events from then on."""
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            await self._lock(conn, webhook_id)
            if enabled:
                await conn.execute(WEBHOOKS["enable_webhook"], {"id": webhook_id})
            else:
                await conn.execute(
                    WEBHOOKS["disable_webhook"],
                    {"id": webhook_id, "reason": "disabled by an admin"},
                )
            return await self._get(conn, webhook_id)

    async def _lock(self, conn: Any, webhook_id: uuid.UUID) -> Mapping[str, Any]:
        row = await (await conn.execute(WEBHOOKS["lock_webhook"], {"id": webhook_id})).fetchone()
        if row is None:
            raise NotFound(f"no webhook {webhook_id}")
        return row  # type: ignore[no-any-return]

    async def delete(self, by: Asker, webhook_id: uuid.UUID) -> None:
        """The endpoint goes, with its deliveries and their attempts."""
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            cur = await conn.execute(WEBHOOKS["delete_webhook"], {"id": webhook_id})
            if await cur.fetchone() is None:
                raise NotFound(f"no webhook {webhook_id}")

    async def rotate_secret(
        self, by: Asker, webhook_id: uuid.UUID, grace: datetime.timedelta
    ) -> NewWebhook:
        """A new signing secret (shown this once); the old one keeps signing
        beside it for `grace`, so receivers can switch over."""
        if grace < datetime.timedelta(0) or grace > MAX_SECRET_GRACE:
            raise InvalidArgument(f"a grace period is 0 to {MAX_SECRET_GRACE.days} days")
        vault = self.keyed()
        secret = new_secret()
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            if (await self._lock(conn, webhook_id))["kind"] == WebhookKind.SLACK_APP.value:
                raise FailedPrecondition(
                    "a Slack app's signing secret is Slack's: disconnect the app and connect "
                    "it again with the new one"
                )
            await conn.execute(
                WEBHOOKS["rotate_webhook_secret"],
                {"id": webhook_id, "grace": grace, "secret_sealed": vault.seal(secret, webhook_id)},
            )
            webhook = await self._get(conn, webhook_id)
        return NewWebhook(webhook, secret)

    # --- its deliveries ------------------------------------------------------------------

    async def list_deliveries(
        self,
        by: Asker,
        webhook_id: uuid.UUID,
        states: Sequence[DeliveryState],
        size: int,
        page_token: str,
    ) -> Page[WebhookDelivery]:
        """The endpoint's deliveries, newest first."""
        limit = page_size(size)
        before = _after(page_token) if page_token else (_END, uuid.UUID(int=2**128 - 1))
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            await self._get(conn, webhook_id)
            cur = await conn.execute(
                WEBHOOKS["list_deliveries"],
                {
                    "endpoint_id": webhook_id,
                    "states": sorted({s.value for s in states}),
                    "before_created": before[0],
                    "before_id": before[1],
                    "limit": limit + 1,
                },
            )
            items = [_delivery(r) for r in await cur.fetchall()]
        if len(items) <= limit:
            return Page(items)
        last = items[limit - 1]
        return Page(items[:limit], encode_token(last.created_at.isoformat(), last.delivery_id))

    async def get_delivery(
        self, by: Asker, delivery_id: uuid.UUID
    ) -> tuple[WebhookDelivery, list[WebhookAttempt], str]:
        """A delivery, every attempt at it (oldest first) and its body."""
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            row = await (
                await conn.execute(WEBHOOKS["get_delivery"], {"id": delivery_id})
            ).fetchone()
            if row is None:
                raise NotFound(f"no webhook delivery {delivery_id}")
            cur = await conn.execute(WEBHOOKS["list_attempts"], {"delivery_id": delivery_id})
            attempts = [_attempt(r) for r in await cur.fetchall()]
        return _delivery(row), attempts, row["body"]

    async def redeliver(self, by: Asker, delivery_id: uuid.UUID) -> WebhookDelivery:
        """Sends the delivery again now, with the same `webhook-id` and body,
        and its retry schedule from the start; delivered or failed alike."""
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            row = await (
                await conn.execute(WEBHOOKS["lock_delivery"], {"id": delivery_id})
            ).fetchone()
            if row is None:
                raise NotFound(f"no webhook delivery {delivery_id}")
            if not row["enabled"]:
                raise FailedPrecondition(
                    f"the webhook of delivery {delivery_id} is disabled; enable it first"
                )
            if row["sending"]:
                raise FailedPrecondition(
                    f"delivery {delivery_id} is being sent right now; see how it went first"
                )
            await conn.execute(WEBHOOKS["redeliver"], {"id": delivery_id})
            row = await (
                await conn.execute(WEBHOOKS["get_delivery"], {"id": delivery_id})
            ).fetchone()
        assert row is not None
        return _delivery(row)

    # --- the servers' side ------------------------------------------------------------------

    async def pending(self) -> tuple[int, float]:
        """Deliveries of every workspace still to be sent, and the age in
        seconds of the oldest of them (0 when none)."""
        async with self.db.maintenance() as conn:
            cur = await conn.execute("SELECT * FROM compass_webhook_metrics()")
            row = await cur.fetchone()
        return (
            (int(row["pending_deliveries"]), float(row["oldest_pending_seconds"]))
            if row
            else (0, 0.0)
        )

    async def backlog(self, limit: int) -> list[tuple[uuid.UUID, uuid.UUID]]:
        """(workspace, endpoint) of enabled endpoints behind their log."""
        async with self.db.deliveries() as conn:
            cur = await conn.execute(WEBHOOKS["backlog"], {"limit": limit})
            return [(r["workspace_id"], r["endpoint_id"]) for r in await cur.fetchall()]

    async def fan_out(
        self,
        workspace_id: uuid.UUID,
        webhook_id: uuid.UUID,
        derive: Derive,
        limit: int = FAN_OUT_BATCH,
    ) -> int | None:
        """Turns the next page of the endpoint's log into its deliveries and
        moves its cursor past that page, in one transaction holding the
        endpoint's row. Returns the events read; None when another server
        holds the endpoint, or it is disabled or gone."""
        async with self.db.delivery_tx(workspace_id) as conn:
            row = await (
                await conn.execute(WEBHOOKS["lock_for_fan_out"], {"id": webhook_id})
            ).fetchone()
            if row is None:
                return None
            cur = await conn.execute(
                EVENTS["read_events"],
                {"after": row["event_cursor"], "limit": limit, "max_bytes": EVENT_PAGE_BYTES},
            )
            events = [event_from_row(r) for r in await cur.fetchall()]
            if not events:
                return 0
            directory = await self._directory(conn, workspace_id, events)
            if row["kind"] == WebhookKind.EMAIL.value:
                directory = await self._mail_directory(conn, directory, events)
            elif row["kind"] == WebhookKind.PUSH.value:
                directory = await self._push_directory(conn, directory, events)
            elif row["kind"] == WebhookKind.SLACK_APP.value:
                directory = await self._slack_dm_directory(conn, directory, events, webhook_id)
            kinds = frozenset(WebhookEventType(t) for t in row["event_types"])
            drafts = derive(WebhookKind(row["kind"]), kinds, events, directory)
            if drafts:
                await conn.execute(
                    WEBHOOKS["insert_deliveries"],
                    {
                        "endpoint_id": webhook_id,
                        "ids": [uuid.uuid4() for _ in drafts],
                        "event_ids": [d.event_id for d in drafts],
                        "types": [d.event_type.value for d in drafts],
                        "subjects": [d.subject for d in drafts],
                        "keys": [d.dedupe_key for d in drafts],
                        "bodies": [d.body for d in drafts],
                    },
                )
            await conn.execute(
                WEBHOOKS["move_cursor"], {"id": webhook_id, "cursor": events[-1].event_id}
            )
        return len(events)

    async def _directory(
        self, conn: Any, workspace_id: uuid.UUID, events: Sequence[Event]
    ) -> Directory:
        channel_ids, account_ids, item_ids = _named(events)
        channels: dict[uuid.UUID, tuple[str, ChannelKind]] = {}
        handles: dict[uuid.UUID, str] = {}
        items: dict[uuid.UUID, InboxItemView] = {}
        if channel_ids:
            cur = await conn.execute(WEBHOOKS["channel_names"], {"ids": list(channel_ids)})
            channels = {r["id"]: (r["name"], ChannelKind(r["kind"])) for r in await cur.fetchall()}
        if account_ids:
            cur = await conn.execute(WEBHOOKS["handles"], {"ids": list(account_ids)})
            handles = {r["id"]: r["handle"] for r in await cur.fetchall()}
        if item_ids:
            cur = await conn.execute(WEBHOOKS["inbox_items"], {"ids": list(item_ids)})
            items = {r["id"]: _item_view(r) for r in await cur.fetchall()}
        return Directory(workspace_id, channels, handles, items)

    async def _mail_directory(
        self, conn: Any, directory: Directory, events: Sequence[Event]
    ) -> Directory:
        """The directory with the people an email endpoint may mail about the
        page's asks: their named answerers and their channels' people."""
        members, wanted = await _people_of(conn, directory, events)
        people: dict[uuid.UUID, tuple[str, str, str]] = {}
        if wanted:
            cur = await conn.execute(WEBHOOKS["mail_people"], {"ids": list(wanted)})
            people = {r["id"]: (r["handle"], r["email"], r["wants"]) for r in await cur.fetchall()}
        return dataclasses.replace(
            directory,
            people=people,
            members={c: tuple(ids) for c, ids in members.items()},
        )

    async def _push_directory(
        self, conn: Any, directory: Directory, events: Sequence[Event]
    ) -> Directory:
        """The directory with the people a push endpoint may push to about the
        page's asks, their push choice and their subscriptions."""
        members, wanted = await _people_of(conn, directory, events)
        push: dict[uuid.UUID, bool | None] = {}
        subscriptions: dict[uuid.UUID, list[uuid.UUID]] = {}
        if wanted:
            cur = await conn.execute(PUSH["push_people"], {"ids": list(wanted)})
            push = {r["id"]: r["push"] for r in await cur.fetchall()}
            cur = await conn.execute(PUSH["subscriptions_of"], {"ids": list(push)})
            for r in await cur.fetchall():
                subscriptions.setdefault(r["account_id"], []).append(r["id"])
        return dataclasses.replace(
            directory,
            members={c: tuple(ids) for c, ids in members.items()},
            push=push,
            subscriptions={a: tuple(ids) for a, ids in subscriptions.items()},
        )

    async def _slack_dm_directory(
        self, conn: Any, directory: Directory, events: Sequence[Event], app_id: uuid.UUID
    ) -> Directory:
        """The directory with the people a Slack app may send a direct message
        about the page's asks: each linked to a Slack user of the app's team."""
        members, wanted = await _people_of(conn, directory, events)
        linked: dict[uuid.UUID, tuple[str, bool | None]] = {}
        if wanted:
            cur = await conn.execute(
                PUSH["slack_dm_people"], {"ids": list(wanted), "endpoint_id": app_id}
            )
            linked = {r["id"]: (r["slack_user_id"], r["slack_dm"]) for r in await cur.fetchall()}
        return dataclasses.replace(
            directory, members={c: tuple(ids) for c, ids in members.items()}, slack_dm=linked
        )

    async def set_email_preference(self, by: Asker, account_id: uuid.UUID, wants: str) -> None:
        """What `account_id` wants mail about: 'off', 'named' or 'all'. A
        person sets their own; an admin (or the operator) anyone's."""
        if wants not in ("off", "named", "all"):
            raise InvalidArgument("email is one of: off, named, all")
        async with self.db.tx(by) as conn:
            if getattr(by, "account_id", None) != account_id:
                await self.admin.admit(conn, by)
            cur = await conn.execute(
                WEBHOOKS["set_email_preference"], {"account_id": account_id, "wants": wants}
            )
            if await cur.fetchone() is None:
                raise NotFound(f"no person {account_id} in this workspace")

    async def claim(
        self,
        server_id: uuid.UUID,
        lease: datetime.timedelta,
        limit: int,
        per_endpoint: int,
        busy: Mapping[uuid.UUID, int],
        per_workspace: int | None = None,
        busy_workspaces: Mapping[uuid.UUID, int] | None = None,
        kinds: Iterable[WebhookKind] = tuple(WebhookKind),
    ) -> list[ClaimedDelivery]:
        """Due deliveries for one attempt each, at most `limit`; per endpoint
        at most `per_endpoint` less what this server has in flight there
        (`busy`), and per workspace `per_workspace` less its in flight
        (`busy_workspaces`), each workspace's first before any one's second;
        of endpoints of `kinds` only. No other server sends them until
        `lease` has passed."""
        busy_workspaces = busy_workspaces or {}
        async with self.db.deliveries() as conn:
            cur = await conn.execute(
                WEBHOOKS["claim"],
                {
                    "server": server_id,
                    "lease": lease,
                    "limit": limit,
                    "per_endpoint": per_endpoint,
                    "per_workspace": limit if per_workspace is None else per_workspace,
                    "busy_ids": list(busy),
                    "busy_counts": list(busy.values()),
                    "busy_workspaces": list(busy_workspaces),
                    "busy_workspace_counts": list(busy_workspaces.values()),
                    "kinds": [k.value for k in kinds],
                },
            )
            rows = await cur.fetchall()
        return [self._claimed(r) for r in rows]

    def _claimed(self, row: Mapping[str, Any]) -> ClaimedDelivery:
        webhook_id = row["endpoint_id"]
        url, problem = "", ""
        signing: tuple[str, ...] = ()
        try:
            vault = self.keyed()
            url = vault.open(row["url_sealed"], webhook_id)
            signing = tuple(
                vault.open(sealed, webhook_id)
                for sealed in (row["secret_sealed"], row["previous_secret_sealed"])
                if sealed is not None
            )
        except (KeyProblem, FailedPrecondition) as exc:
            problem = exc.message
        return ClaimedDelivery(
            delivery_id=row["delivery_id"],
            workspace_id=row["workspace_id"],
            webhook_id=webhook_id,
            attempt=row["attempt"],
            failures=row["failures"],
            event_type=WebhookEventType(row["event_type"]),
            body=row["body"],
            kind=WebhookKind(row["kind"]),
            url=url,
            secrets=signing,
            problem=problem,
        )

    async def finish(self, results: Sequence[AttemptResult]) -> int:
        """Records how attempts went, in one statement; each only while it is
        its delivery's latest (else its lease ran out and another attempt took
        the delivery over). Returns how many were recorded."""
        async with self.db.deliveries() as conn:
            cur = await conn.execute(
                WEBHOOKS["finish"],
                {
                    "deliveries": [r.delivery_id for r in results],
                    "attempts": [r.attempt for r in results],
                    "delivered": [r.delivered for r in results],
                    "retry_in": [r.retry_in for r in results],
                    "status_codes": [r.status_code for r in results],
                    "latencies": [r.latency_ms for r in results],
                    "errors": [r.error for r in results],
                    "responses": [r.response for r in results],
                    "disable": [r.disable for r in results],
                },
            )
            row = await cur.fetchone()
        return int(row["recorded"]) if row else 0

    async def prune(self, age: datetime.timedelta, batch: int) -> int:
        """Deletes up to `batch` deliveries finished longer than `age` ago."""
        async with self.db.deliveries() as conn:
            row = await (
                await conn.execute(WEBHOOKS["prune"], {"age": age, "batch": batch})
            ).fetchone()
        return int(row["n"]) if row else 0


def _after(token: str) -> tuple[datetime.datetime, uuid.UUID]:
    created, key = decode_token(token, 2)
    try:
        return datetime.datetime.fromisoformat(created), uuid.UUID(key)
    except ValueError:
        raise InvalidArgument("page_token is not one this server issued") from None


async def _people_of(
    conn: Any, directory: Directory, events: Sequence[Event]
) -> tuple[dict[uuid.UUID, list[uuid.UUID]], set[uuid.UUID]]:
    """The people of the page's channels, and everyone its asks may reach:
    those people, the asks' named answerers and the people their follow-up
    steps reached."""
    channel_ids = list(directory.channels)
    members: dict[uuid.UUID, list[uuid.UUID]] = {}
    if channel_ids:
        cur = await conn.execute(WEBHOOKS["channel_people"], {"ids": channel_ids})
        for r in await cur.fetchall():
            members.setdefault(r["channel_id"], []).append(r["account_id"])
    wanted = {a for ids in members.values() for a in ids}
    for e in events:
        if e.message is not None:
            for b in e.message.blocks:
                if isinstance(b, Ask):
                    wanted.update(b.answerer_ids)
                    for step in b.follow_up_steps:
                        wanted.update(step.account_ids)
    return members, wanted
