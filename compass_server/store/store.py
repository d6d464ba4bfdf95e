"""The store every surface calls: channels, messages, asks, presence, events.

Each write is one transaction scoped to a workspace; its events are appended
to the event log in the same transaction, so an event exists if and only if
its change committed. Events get their ids just after the commit (see
sequencer.py); reads of the log first wait for this process's own writes.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from psycopg.types.json import Jsonb

from compass_server.store import blocks as blockrules
from compass_server.store.admin import AdminStore
from compass_server.store.asks import ASK_CACHE_BYTES, ASKS, AskCache, AskEndings, ending_item
from compass_server.store.coalesce import WRITE_BATCH, Coalescer
from compass_server.store.db import Conn, Database, queries
from compass_server.store.errors import (
    Corrupt,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    StoreError,
    quoted,
)
from compass_server.store.links import AskLinks
from compass_server.store.pages import MAX_PAGE, page_size
from compass_server.store.pages import decode_token as _decode_token
from compass_server.store.pages import encode_token as _encode_token
from compass_server.store.people import People
from compass_server.store.posts import Posts, post_writes
from compass_server.store.types import (
    Account,
    AccountKind,
    Actor,
    AgentMove,
    Ask,
    AskStatus,
    Attachment,
    Block,
    Channel,
    ChannelKind,
    Event,
    EventKind,
    InboxChange,
    InboxMessage,
    InboxStatus,
    Message,
    Operator,
    Page,
    Participation,
    Presence,
    PresenceState,
    Runner,
    RunnerPrincipal,
    Scope,
    SessionBinding,
    Surface,
    Workspace,
)

ACCOUNTS = queries("accounts")
CHANNELS = queries("channels")
MESSAGES = queries("messages")
EVENTS = queries("events")
SESSIONS = queries("sessions")

MAX_NAME_CHARS = 80
MAX_TOPIC_CHARS = 1_000
MAX_STATUS_CHARS = 200
MAX_QUERY_CHARS = 200
MAX_ACCOUNT_IDS = 200
# A page of messages in one response, in bytes of blocks as stored (at least
# one message): 200 of the largest would be ~50 MB.
MAX_PAGE_BYTES = 4 << 20
# A page of the event log, in payload bytes (at least one event).
EVENT_PAGE_BYTES = 1 << 20
# Channels one account may be a member of: every stream and relay session of
# the account holds the set its chain takes part in.
CHANNELS_PER_ACCOUNT = 10_000


def parse_id(value: str, what: str) -> uuid.UUID:
    """An id from input: empty is INVALID_ARGUMENT, a malformed one can't name
    any row and is NOT_FOUND like an unknown one."""
    if not value:
        raise InvalidArgument(f"{what} is required")
    try:
        return uuid.UUID(value)
    except ValueError:
        raise NotFound(f"no {what.removesuffix('_id').replace('_', ' ')} {quoted(value)}") from None


# --- row ⇄ struct ----------------------------------------------------------


def _message(row: dict[str, Any]) -> Message:
    return Message(
        message_id=row["id"],
        channel_id=row["channel_id"],
        author_id=row["author_id"],
        author_handle=row["author_handle"],
        blocks=blockrules.blocks_as_of(blockrules.blocks_from_json(row["blocks"]), row["read_at"]),
        created_at=row["created_at"],
        position=row["position"],
    )


def _account(row: dict[str, Any]) -> Account:
    return Account(
        row["id"],
        row["workspace_id"],
        row["handle"],
        AccountKind(row["kind"]),
        row["owner_id"],
        parent_id=row["parent_id"],
    )


def _channel(row: dict[str, Any]) -> Channel:
    return Channel(
        channel_id=row["id"],
        name=row["name"],
        topic=row["topic"],
        kind=ChannelKind(row["kind"]),
        member_ids=tuple(row["member_ids"]),
        created_at=row["created_at"],
    )


def _channel_payload(c: Channel) -> dict[str, Any]:
    return {
        "id": str(c.channel_id),
        "name": c.name,
        "topic": c.topic,
        "kind": c.kind.value,
        "member_ids": [str(m) for m in c.member_ids],
        "created_at": c.created_at.isoformat(),
    }


def inbox_message_payload(m: InboxMessage) -> dict[str, Any]:
    return {
        "message_id": str(m.message_id),
        "item_id": str(m.item_id),
        "author_id": str(m.author_id),
        "author_handle": m.author_handle,
        "blocks": blockrules.blocks_to_json(m.blocks),
        "created_at": m.created_at.isoformat(),
        "position": m.position,
        "ask_status": m.ask_status.value if m.ask_status else None,
        "withdrawn_reason": m.withdrawn_reason,
        "attachments": [
            [str(a.attachment_id), a.name, a.content_type, a.size_bytes] for a in m.attachments
        ],
    }


def _inbox_message_from_payload(p: dict[str, Any]) -> InboxMessage:
    return InboxMessage(
        message_id=uuid.UUID(p["message_id"]),
        item_id=uuid.UUID(p["item_id"]),
        author_id=uuid.UUID(p["author_id"]),
        author_handle=p["author_handle"],
        blocks=blockrules.blocks_from_json(p["blocks"]),
        created_at=datetime.datetime.fromisoformat(p["created_at"]),
        position=p["position"],
        ask_status=AskStatus(p["ask_status"]) if p["ask_status"] else None,
        withdrawn_reason=p["withdrawn_reason"],
        attachments=tuple(Attachment(uuid.UUID(a[0]), a[1], a[2], a[3]) for a in p["attachments"]),
    )


def _inbox_change_payload(c: InboxChange) -> dict[str, Any]:
    return {
        "item_id": str(c.item_id),
        "agent_id": str(c.agent_id),
        "key": c.key,
        "revision": c.revision,
        "status": c.status.value,
        "actor_id": str(c.actor_id),
        "audience": [str(a) for a in c.audience],
        "message": inbox_message_payload(c.message) if c.message else None,
    }


def _inbox_change_from_payload(p: dict[str, Any]) -> InboxChange:
    return InboxChange(
        item_id=uuid.UUID(p["item_id"]),
        agent_id=uuid.UUID(p["agent_id"]),
        key=p["key"],
        revision=p["revision"],
        status=InboxStatus(p["status"]),
        actor_id=uuid.UUID(p["actor_id"]),
        audience=tuple(uuid.UUID(a) for a in p["audience"]),
        message=_inbox_message_from_payload(p["message"]) if p["message"] else None,
    )


def event_from_row(row: dict[str, Any]) -> Event:
    kind = EventKind(row["kind"])
    p = row["payload"]
    message = presence = channel = inbox = moved = None
    if kind in (EventKind.MESSAGE_POSTED, EventKind.MESSAGE_UPDATED):
        message = blockrules.message_from_json(p)
    elif kind is EventKind.AGENT_MOVED:
        parent = p["parent_id"]
        moved = AgentMove(uuid.UUID(p["account_id"]), uuid.UUID(parent) if parent else None)
    elif kind is EventKind.INBOX_ITEM_CHANGED:
        inbox = _inbox_change_from_payload(p)
    elif kind is EventKind.PRESENCE_CHANGED:
        presence = Presence(
            account_id=uuid.UUID(p["account_id"]),
            state=PresenceState(p["state"]),
            status_text=p.get("status_text", ""),
        )
    else:
        channel = Channel(
            channel_id=uuid.UUID(p["id"]),
            name=p["name"],
            topic=p["topic"],
            kind=ChannelKind(p["kind"]),
            member_ids=tuple(uuid.UUID(m) for m in p["member_ids"]),
            created_at=datetime.datetime.fromisoformat(p["created_at"]),
        )
    return Event(
        event_id=row["id"],
        kind=kind,
        channel_id=row["channel_id"],
        message=message,
        presence=presence,
        channel=channel,
        created_at=row["created_at"],
        inbox=inbox,
        size=row.get("size", 0),
        moved=moved,
    )


class _Events:
    """Events a transaction appends just before it commits."""

    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.channel_ids: list[uuid.UUID | None] = []
        self.payloads: list[Jsonb] = []

    def channel(self, c: Channel) -> None:
        self.kinds.append(EventKind.CHANNEL_CHANGED.value)
        self.channel_ids.append(c.channel_id)
        self.payloads.append(Jsonb(_channel_payload(c)))

    def inbox(self, c: InboxChange) -> None:
        # Workspace-wide like presence; its audience travels in the payload.
        self.kinds.append(EventKind.INBOX_ITEM_CHANGED.value)
        self.channel_ids.append(None)
        self.payloads.append(Jsonb(_inbox_change_payload(c)))

    async def presence(self, conn: Conn, agent_id: uuid.UUID) -> None:
        """Recomputes an agent's presence; its change is appended with the rest."""
        cur = await conn.execute(ACCOUNTS["presence_change"], {"agent_id": agent_id})
        row = await cur.fetchone()
        if row is not None and row["change"] is not None:
            self.kinds.append(EventKind.PRESENCE_CHANGED.value)
            self.channel_ids.append(None)
            self.payloads.append(Jsonb(row["change"]))

    async def append(self, conn: Conn) -> None:
        """Appends every event; call it last, so the event counter's lock is the
        last lock the transaction takes (no lock-order deadlocks). Events it
        could not number (the counter was busy) are numbered after commit."""
        if self.kinds:
            cur = await conn.execute(
                EVENTS["append_events"],
                {"kinds": self.kinds, "channel_ids": self.channel_ids, "payloads": self.payloads},
            )
            row = await cur.fetchone()
            if row is None or row["last_id"] is None:
                Database.appended()


async def _refresh_presence(conn: Conn, agent_id: uuid.UUID) -> None:
    """Recomputes an agent's presence, appending its change when it moved."""
    row = await (
        await conn.execute(ACCOUNTS["refresh_presence"], {"agent_id": agent_id})
    ).fetchone()
    if row is not None and row["changed"]:
        Database.appended()


class Store(AskEndings, People, AskLinks, Posts):
    def __init__(
        self,
        db: Database,
        *,
        ask_cache_bytes: int = ASK_CACHE_BYTES,
        deadline_bounds: blockrules.DeadlineBounds = blockrules.DEADLINE_BOUNDS,
        write_batch: int = WRITE_BATCH,
    ) -> None:
        """`write_batch`: posts (or ask endings) sent as one statement at most;
        1 sends each alone."""
        self.db = db
        self.admin = AdminStore(db)
        self.channels_per_account = CHANNELS_PER_ACCOUNT
        self._asks = AskCache(ask_cache_bytes)
        self.deadline_bounds = deadline_bounds
        self.deadline_listeners = []
        self.ending_listeners = []
        self.write_listeners: list[Callable[[str, int], None]] = []
        self._posts = post_writes(
            db, max_items=write_batch, observe=lambda n: self._wrote("post", n)
        )
        self._endings = Coalescer(
            db,
            single=lambda p: ASKS["answer_ask"] if "answered" in p else ASKS["end_ask"],
            batch=ASKS["end_asks"],
            column="result",
            encode=ending_item,
            max_items=write_batch,
            observe=lambda n: self._wrote("ending", n),
        )

    def _wrote(self, kind: str, count: int) -> None:
        for listener in self.write_listeners:
            listener(kind, count)

    # --- workspaces, accounts, runners, sign-in ----------------------------

    async def create_workspace(self, name: str) -> Workspace:
        if not name.strip():
            raise InvalidArgument("a workspace needs a name")
        ws = Workspace(workspace_id=uuid.uuid4(), name=name)
        async with self.db.tx(Operator(ws.workspace_id)) as conn:
            await conn.execute(ACCOUNTS["insert_workspace"], {"id": ws.workspace_id, "name": name})
        return ws

    async def create_account(
        self,
        workspace_id: uuid.UUID,
        handle: str,
        kind: AccountKind,
        owner_id: uuid.UUID | None = None,
    ) -> tuple[Account, str]:
        """The operator's shortcut to AdminStore.create_account: the account
        and its token, shown this once."""
        account, issued = await self.admin.create_account(
            Operator(workspace_id), handle, kind, owner_id
        )
        return account, issued.secret

    async def create_runner(self, workspace_id: uuid.UUID, name: str) -> tuple[Runner, str]:
        runner, issued = await self.admin.create_runner(Operator(workspace_id), name)
        return runner, issued.secret

    async def assign_agent(
        self, workspace_id: uuid.UUID, runner_id: uuid.UUID, agent_id: uuid.UUID
    ) -> None:
        await self.admin.assign_agent(Operator(workspace_id), runner_id, agent_id)

    async def runner_agents(self, runner: RunnerPrincipal) -> list[tuple[uuid.UUID, str]]:
        async with self.db.tx(runner) as conn:
            cur = await conn.execute(ACCOUNTS["runner_agents"], {"runner_id": runner.runner_id})
            return [(r["id"], r["handle"]) for r in await cur.fetchall()]

    async def get_account(self, scope: Scope, account_id: uuid.UUID) -> Account:
        async with self.db.tx(scope) as conn:
            row = await (await conn.execute(ACCOUNTS["get_account"], {"id": account_id})).fetchone()
        if row is None:
            raise NotFound(f"no account {account_id}")
        return _account(row)

    async def get_accounts(self, actor: Actor, ids: Sequence[uuid.UUID]) -> list[Account]:
        """Accounts of the actor's workspace, in the order asked; unknown ids
        are left out."""
        if len(ids) > MAX_ACCOUNT_IDS:
            raise InvalidArgument(
                f"{len(ids)} account ids; at most {MAX_ACCOUNT_IDS} are looked up at once"
            )
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(ACCOUNTS["accounts_by_id"], {"ids": list(ids)})
            found = {r["id"]: _account(r) for r in await cur.fetchall()}
        return [found[i] for i in dict.fromkeys(ids) if i in found]

    # --- channels -----------------------------------------------------------

    async def _channel_as_member(self, conn: Conn, actor: Actor, channel_id: uuid.UUID) -> Channel:
        cur = await conn.execute(
            CHANNELS["get_channel_as_member"], {"id": channel_id, "actor": actor.account_id}
        )
        row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no channel {channel_id}")
        return _channel(row)

    async def _require_accounts(self, conn: Conn, ids: Sequence[uuid.UUID]) -> None:
        cur = await conn.execute(CHANNELS["accounts_exist"], {"ids": list(ids)})
        found = {r["id"] for r in await cur.fetchall()}
        for account_id in ids:
            if account_id not in found:
                raise NotFound(f"no account {account_id}")

    async def _join(
        self, conn: Conn, actor: Actor, channel_id: uuid.UUID, ids: Sequence[uuid.UUID]
    ) -> list[uuid.UUID]:
        """Makes the accounts members (those not yet), within each account's
        bound on channels; the accounts that joined."""
        await conn.execute(CHANNELS["lock_memberships"], {"ids": list(ids)})
        joined = []
        for account_id in ids:
            cur = await conn.execute(
                CHANNELS["add_member"], {"channel_id": channel_id, "account_id": account_id}
            )
            if await cur.fetchone() is not None:
                joined.append(account_id)
        if joined:
            most = self.channels_per_account
            row = await (
                await conn.execute(CHANNELS["memberships_over"], {"ids": joined, "most": most})
            ).fetchone()
            if row is not None:
                who = (
                    "you are"
                    if row["account_id"] == actor.account_id
                    else f"account {row['account_id']} is"
                )
                raise ResourceExhausted(
                    f"{who} in {most} channels already, the most an account may be in; "
                    "nothing changed"
                )
        return joined

    async def create_channel(
        self, actor: Actor, name: str, topic: str, member_ids: Sequence[uuid.UUID]
    ) -> Channel:
        if not name.strip() or len(name) > MAX_NAME_CHARS:
            raise InvalidArgument(f"a channel name needs 1 to {MAX_NAME_CHARS} characters")
        if len(topic) > MAX_TOPIC_CHARS:
            raise InvalidArgument(f"a topic is at most {MAX_TOPIC_CHARS} characters")
        members = list(dict.fromkeys([actor.account_id, *member_ids]))
        if len(members) > MAX_PAGE:
            raise InvalidArgument(f"a channel starts with at most {MAX_PAGE} members")
        channel_id = uuid.uuid4()
        events = _Events()
        async with self.db.tx(actor) as conn:
            await self._require_accounts(conn, members)
            await conn.execute(
                CHANNELS["insert_channel"],
                {"id": channel_id, "name": name, "topic": topic, "kind": "channel", "dm_key": None},
            )
            await self._join(conn, actor, channel_id, members)
            channel = await self._channel_as_member(conn, actor, channel_id)
            events.channel(channel)
            await events.append(conn)
        return channel

    async def list_channels(self, actor: Actor, size: int, token: str) -> Page[Channel]:
        limit = page_size(size)
        after_created, after_id = (
            datetime.datetime.min.replace(tzinfo=datetime.UTC),
            uuid.UUID(int=0),
        )
        if token:
            created, cid = _decode_token(token, 2)
            try:
                after_created, after_id = datetime.datetime.fromisoformat(created), uuid.UUID(cid)
            except ValueError:
                raise InvalidArgument("page_token is not one this server issued") from None
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(
                CHANNELS["list_channels"],
                {
                    "actor": actor.account_id,
                    "after_created": after_created,
                    "after_id": after_id,
                    "limit": limit + 1,
                },
            )
            rows = await cur.fetchall()
        items = [_channel(r) for r in rows[:limit]]
        next_token = ""
        if len(rows) > limit:
            last = items[-1]
            next_token = _encode_token(last.created_at.isoformat(), last.channel_id)
        return Page(items, next_token)

    async def open_dm(self, actor: Actor, other_id: uuid.UUID) -> Channel:
        if other_id == actor.account_id:
            raise InvalidArgument("a DM needs another account")
        dm_key = ":".join(sorted([str(actor.account_id), str(other_id)]))
        events = _Events()
        async with self.db.tx(actor) as conn:
            await self._require_accounts(conn, [other_id])
            await conn.execute(CHANNELS["lock_dm"], {"dm_key": dm_key})
            row = await (
                await conn.execute(CHANNELS["channel_by_dm_key"], {"dm_key": dm_key})
            ).fetchone()
            if row is not None:
                return await self._channel_as_member(conn, actor, row["id"])
            channel_id = uuid.uuid4()
            await conn.execute(
                CHANNELS["insert_channel"],
                {"id": channel_id, "name": "", "topic": "", "kind": "dm", "dm_key": dm_key},
            )
            await self._join(conn, actor, channel_id, [actor.account_id, other_id])
            channel = await self._channel_as_member(conn, actor, channel_id)
            events.channel(channel)
            await events.append(conn)
        return channel

    async def _lock_channel(
        self, conn: Conn, actor: Actor, channel_id: uuid.UUID, not_for_dm: str
    ) -> None:
        """Locks a channel the actor belongs to for a change DMs don't take."""
        cur = await conn.execute(
            CHANNELS["lock_channel_as_member"], {"id": channel_id, "actor": actor.account_id}
        )
        row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no channel {channel_id}")
        if row["kind"] == ChannelKind.DM:
            raise InvalidArgument(not_for_dm)

    async def add_channel_member(
        self, actor: Actor, channel_id: uuid.UUID, account_id: uuid.UUID
    ) -> Channel:
        events = _Events()
        async with self.db.tx(actor) as conn:
            await self._lock_channel(
                conn, actor, channel_id, "a DM has exactly two members; create a channel instead"
            )
            await self._require_accounts(conn, [account_id])
            added = await self._join(conn, actor, channel_id, [account_id])
            channel = await self._channel_as_member(conn, actor, channel_id)
            if added:
                events.channel(channel)
                # Joining can't open an ask, but it can make one count again.
                await events.presence(conn, account_id)
                await events.append(conn)
        return channel

    async def update_topic(self, actor: Actor, channel_id: uuid.UUID, topic: str) -> Channel:
        if len(topic) > MAX_TOPIC_CHARS:
            raise InvalidArgument(f"a topic is at most {MAX_TOPIC_CHARS} characters")
        events = _Events()
        async with self.db.tx(actor) as conn:
            await self._lock_channel(conn, actor, channel_id, "a DM has no topic")
            await conn.execute(CHANNELS["update_topic"], {"id": channel_id, "topic": topic})
            channel = await self._channel_as_member(conn, actor, channel_id)
            events.channel(channel)
            await events.append(conn)
        return channel

    async def participation(self, actor: Actor) -> Participation:
        """The actor's chain and the channels it takes part in, as of now."""
        async with self.db.tx(actor) as conn:
            row = await (
                await conn.execute(CHANNELS["chain"], {"actor": actor.account_id})
            ).fetchone()
            cur = await conn.execute(CHANNELS["participation"], {"actor": actor.account_id})
            channels = {r["channel_id"]: r["since"] for r in await cur.fetchall()}
        chain = tuple(row["chain"]) if row is not None else (actor.account_id,)
        return Participation(actor.account_id, chain, channels)

    # --- messages and asks --------------------------------------------------

    async def append_message(
        self,
        actor: Actor,
        channel_id: uuid.UUID,
        blocks: Sequence[Block],
        *,
        surface: Surface | None = None,
    ) -> Message:
        """Posts blocks as the actor (see Posts.post), even an ask identical to
        an open one: the surfaces look those up (a post says whether)."""
        posted = await self.post(actor, channel_id, blocks, surface=surface, allow_identical=True)
        return posted.message

    async def get_message(self, actor: Actor, message_id: uuid.UUID) -> Message:
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(
                MESSAGES["get_message_as_member"], {"id": message_id, "actor": actor.account_id}
            )
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no message {message_id}")
        return _message(row)

    async def ask_trace(self, actor: Actor, ask_id: str) -> str:
        """The traceparent the ask was posted in ("" when untraced or unseen)."""
        cached = self._asks.get(ask_id)
        if cached is not None:
            return cached.trace
        try:
            return (await self._ask_state(actor, ask_id)).trace
        except StoreError:
            return ""

    async def get_ask(self, actor: Actor, ask_id: str) -> tuple[Message, Ask]:
        """The message holding the ask, and the ask; NOT_FOUND when the actor
        can't see it (the same as an unknown id)."""
        if not ask_id:
            raise InvalidArgument("ask_id is required")
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(
                MESSAGES["get_ask_message"], {"ask_id": ask_id, "actor": actor.account_id}
            )
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no ask {quoted(ask_id)}")
        message = _message(row)
        for block in message.blocks:
            if isinstance(block, Ask) and block.ask_id == ask_id:
                return message, block
        raise Corrupt(f"ask {quoted(ask_id)} is indexed but missing from its message")

    async def list_messages(
        self, actor: Actor, channel_id: uuid.UUID, size: int, token: str
    ) -> Page[Message]:
        limit = page_size(size)
        before = _position_token(token)
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(
                MESSAGES["participates"], {"channel_id": channel_id, "actor": actor.account_id}
            )
            if await cur.fetchone() is None:
                raise NotFound(f"no channel {channel_id}")
            return await _message_page(conn, actor, channel_id, None, before, limit)

    async def search_messages(
        self, actor: Actor, query: str, channel_id: uuid.UUID | None, size: int, token: str
    ) -> Page[Message]:
        if not query.strip():
            raise InvalidArgument("query is required")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidArgument(f"query is at most {MAX_QUERY_CHARS} characters")
        limit = page_size(size)
        before = _position_token(token)
        escaped = query.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        async with self.db.tx(actor) as conn:
            return await _message_page(conn, actor, channel_id, f"%{escaped}%", before, limit)

    # --- presence -------------------------------------------------------------

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
            await _refresh_presence(conn, actor.account_id)
            cur = await conn.execute(ACCOUNTS["presence_of"], {"ids": [actor.account_id]})
            row = await cur.fetchone()
        assert row is not None
        return Presence(row["id"], PresenceState(row["presence_state"]), row["presence_text"])

    # --- runner sessions and the delivery lane ----------------------------------

    async def bind_session(
        self, runner: RunnerPrincipal, agent_id: uuid.UUID, server_id: uuid.UUID
    ) -> SessionBinding:
        """Binds an agent assigned to this runner; NOT_FOUND for any other."""
        session_id = uuid.uuid4()
        async with self.db.tx(runner) as conn:
            cur = await conn.execute(
                ACCOUNTS["runner_agent"], {"runner_id": runner.runner_id, "agent_id": agent_id}
            )
            if await cur.fetchone() is None:
                raise NotFound(f"agent {agent_id} is not assigned to this runner")
            await conn.execute(
                SESSIONS["insert_session"],
                {
                    "id": session_id,
                    "agent_id": agent_id,
                    "runner_id": runner.runner_id,
                    "server_id": server_id,
                },
            )
            row = await (
                await conn.execute(SESSIONS["acked_cursor"], {"agent_id": agent_id})
            ).fetchone()
            assert row is not None
            await _refresh_presence(conn, agent_id)
        return SessionBinding(session_id, agent_id, row["acked_event_id"])

    async def unbind_session(self, server_id: uuid.UUID, session_id: uuid.UUID) -> None:
        """Ends a session this server bound. Server housekeeping, as
        maintenance: it runs when the session's stream ends, also after the
        runner's token stopped signing in."""
        async with self.db.maintenance() as conn:
            row = await (
                await conn.execute(
                    SESSIONS["end_session"], {"server_id": server_id, "id": session_id}
                )
            ).fetchone()
        if row is not None and row["moved"] is not None:
            self.db.sequencer.committed(row["moved"])

    async def ack_delivery(self, scope: Scope, agent_id: uuid.UUID, event_id: int) -> int:
        async with self.db.tx(scope) as conn:
            row = await (
                await conn.execute(SESSIONS["ack"], {"agent_id": agent_id, "event_id": event_id})
            ).fetchone()
        if row is None:
            raise NotFound(f"no delivery lane for agent {agent_id}")
        return int(row["acked_event_id"])

    # --- server liveness --------------------------------------------------------

    async def heartbeat(self, server_id: uuid.UUID) -> bool:
        """Marks the server alive; False when its row was gone (it was reaped)."""
        async with self.db.maintenance() as conn:
            row = await (await conn.execute(SESSIONS["heartbeat"], {"id": server_id})).fetchone()
        assert row is not None
        return not row["inserted"]

    async def remove_server(self, server_id: uuid.UUID) -> None:
        async with self.db.maintenance() as conn:
            await conn.execute(SESSIONS["remove_server"], {"id": server_id})

    async def reap_stale_servers(
        self, stale_after: datetime.timedelta
    ) -> list[tuple[uuid.UUID, uuid.UUID]]:
        """Removes servers silent for longer than stale_after and their sessions,
        and recomputes those agents' presence, in one transaction."""
        async with self.db.maintenance() as conn:
            cur = await conn.execute(SESSIONS["reap_stale_sessions"], {"stale": stale_after})
            reaped = [(r["workspace_id"], r["agent_id"]) for r in await cur.fetchall()]
        for workspace_id in {ws for ws, _ in reaped}:
            self.db.sequencer.committed(workspace_id)
        return reaped

    async def number_leftover_events(self) -> int:
        return await self.db.number_leftovers()

    async def counts(self) -> tuple[int, int]:
        """Asks open in the database, and events committed but not yet numbered."""
        async with self.db.maintenance() as conn:
            row = await (await conn.execute("SELECT * FROM compass_metrics()")).fetchone()
        return (int(row["open_asks"]), int(row["unnumbered_events"])) if row else (0, 0)

    # --- the event log ---------------------------------------------------------

    async def read_events(
        self, scope: Scope, after: int, limit: int, max_bytes: int = EVENT_PAGE_BYTES
    ) -> list[Event]:
        """Events after `after`, oldest first: at most `limit`, and no more than
        `max_bytes` of payload unless the first alone weighs more."""
        await self.db.sequencer.flush(scope.workspace_id)
        async with self.db.tx(scope) as conn:
            cur = await conn.execute(
                EVENTS["read_events"], {"after": after, "limit": limit, "max_bytes": max_bytes}
            )
            rows = await cur.fetchall()
        return [event_from_row(r) for r in rows]

    async def last_event_id(self, scope: Scope) -> int:
        await self.db.sequencer.flush(scope.workspace_id)
        async with self.db.tx(scope) as conn:
            row = await (await conn.execute(EVENTS["last_event_id"])).fetchone()
        return int(row["last_event_id"]) if row else 0


def _position_token(token: str) -> int:
    if not token:
        return 2**63 - 1
    (value,) = _decode_token(token, 1)
    try:
        return int(value)
    except ValueError:
        raise InvalidArgument("page_token is not one this server issued") from None


async def _message_page(
    conn: Conn,
    actor: Actor,
    channel_id: uuid.UUID | None,
    pattern: str | None,
    before: int,
    limit: int,
) -> Page[Message]:
    """A page of messages; up to limit + 1 are fetched, and the page may be
    cut short by bytes: either way, more follow."""
    cur = await conn.execute(
        MESSAGES["message_page"],
        {
            "actor": actor.account_id,
            "channel_id": channel_id,
            "pattern": pattern,
            "before": before,
            "limit": limit + 1,
            "max_bytes": MAX_PAGE_BYTES,
        },
    )
    rows = await cur.fetchall()
    items = [_message(r) for r in rows[:limit]]
    more = len(rows) > limit or (bool(rows) and rows[0]["fetched"] > len(rows))
    token = _encode_token(items[-1].position) if more else ""
    return Page(items, token)
