"""Agents' inboxes: per agent, items keyed by the agent's key, each a thread of
messages where the agent's newest ask replaces the ones before it.

An ask here is the same compass.v1.Ask as in a channel, checked by the same
rules (blocks.prepare_for_append, blocks.apply_answers). Every write locks the
item's row first, so an answer, a close and a post on one item take turns, and
appends its event in the same transaction.
"""

from __future__ import annotations

import datetime
import enum
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg.types.json import Jsonb

from compass_server.inbox import pictures as inbox_pictures
from compass_server.inbox import rules
from compass_server.inbox.pictures import CheckedPicture, Picture, check_pictures
from compass_server.store import blocks as blockrules
from compass_server.store.db import Conn, Database, queries
from compass_server.store.errors import (
    Conflict,
    Corrupt,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    quoted,
)
from compass_server.store.events import PendingEvents
from compass_server.store.pages import decode_token as _decode_token
from compass_server.store.pages import encode_token as _encode_token
from compass_server.store.pages import page_size
from compass_server.store.types import (
    AccountKind,
    Actor,
    Answer,
    Ask,
    AskAnswerBlock,
    AskEnding,
    AskStatus,
    Attachment,
    Block,
    EndingKind,
    InboxChange,
    InboxMessage,
    InboxStatus,
    Page,
    Surface,
    TextBlock,
)

INBOX = queries("inbox")
# Past every message's position: a first page reads before it.
_NO_POSITION = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class InboxItem:
    item_id: uuid.UUID
    agent_id: uuid.UUID
    agent_handle: str
    key: str
    title: str
    status: InboxStatus
    revision: int
    # The item's newest ask and its message; empty/None for a note.
    ask_id: str
    ask_message_id: uuid.UUID | None
    # The agent's reason when it closed the item; empty for a member's close.
    close_reason: str
    # The standing of the item's newest ask; None for a note.
    ask_status: AskStatus | None
    answered_by: uuid.UUID | None
    closed_by: uuid.UUID | None
    created_at: datetime.datetime
    updated_at: datetime.datetime
    settled_at: datetime.datetime | None

    @property
    def state(self) -> rules.ItemState:
        return rules.ItemState(
            self.status, self.revision, self.ask_message_id, self.answered_by, self.closed_by
        )


@dataclass(frozen=True, slots=True)
class InboxThread:
    item: InboxItem
    # Oldest first: the page's pinned messages, then its run.
    messages: list[InboxMessage]
    # Messages in the whole thread.
    total: int
    # Reads the run before this page's; empty when none is left.
    next_page_token: str = ""
    # How many of messages are the first and open-ask message from before the run.
    pinned: int = 0


@dataclass(frozen=True, slots=True)
class PagePlan:
    """Which messages a page of a thread holds, chosen without their blocks,
    and what they weigh as stored."""

    item_id: uuid.UUID
    # Oldest first; the pinned ones lead.
    message_ids: list[uuid.UUID]
    pinned: int
    bytes: int
    total: int
    next_page_token: str


_NOT_ISSUED = "page_token is not one this server issued"


def _page_before(token: str, item_id: uuid.UUID) -> int | None:
    """The position a page token reads before; None for the first page."""
    if not token:
        return None
    item, before = _decode_token(token, 2)
    try:
        of, position = uuid.UUID(item), int(before)
    except ValueError:
        raise InvalidArgument(_NOT_ISSUED) from None
    if not 1 <= position <= _NO_POSITION:
        raise InvalidArgument(_NOT_ISSUED)
    if of != item_id:
        raise InvalidArgument("page_token is of another inbox item")
    return position


class AnswerOutcome(enum.StrEnum):
    TAKEN = "taken"
    # The client key was seen: the first answer stands, nothing new is written.
    REPEATED = "repeated"
    # The ask is replaced, withdrawn or answered, or the revision named is stale.
    NOT_OPEN = "not_open"
    # The answers break a rule of the ask; the reason says which.
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class AnswerResult:
    outcome: AnswerOutcome
    item: InboxItem
    reason: str = ""
    # The answering message, when TAKEN or REPEATED.
    message: InboxMessage | None = None


# --- rows ⇄ structs -----------------------------------------------------------


def _item(row: dict[str, Any]) -> InboxItem:
    return InboxItem(
        item_id=row["id"],
        agent_id=row["agent_id"],
        agent_handle=row["agent_handle"],
        key=row["key"],
        title=row["title"],
        status=InboxStatus(row["status"]),
        revision=row["revision"],
        ask_id=row["ask_id"] or "",
        ask_message_id=row["ask_message_id"],
        close_reason=row["close_reason"],
        ask_status=AskStatus(row["ask_status"]) if row["ask_status"] else None,
        answered_by=row["answered_by"],
        closed_by=row["closed_by"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        settled_at=row["settled_at"],
    )


# The kind of ending each standing gives an ask an older server ended
# without writing one (who and when unknown); a withdrawal with the agent's
# reason is the agent's.
_KIND_OF_STANDING = {
    AskStatus.REPLACED: EndingKind.REPLACED,
    AskStatus.ANSWERED: EndingKind.ANSWERED,
    AskStatus.WITHDRAWN: EndingKind.WITHDRAWN_BY_PERSON,
    AskStatus.DECLINED: EndingKind.DECLINED,
}


def _ending(
    status: AskStatus, ending: dict[str, Any] | None, withdrawn_reason: str
) -> AskEnding | None:
    if ending:
        return blockrules.ending_from_json({"ending": ending})
    if status is AskStatus.OPEN:
        return None
    if status is AskStatus.WITHDRAWN and withdrawn_reason:
        return AskEnding(EndingKind.WITHDRAWN_BY_AGENT, reason=withdrawn_reason)
    return AskEnding(_KIND_OF_STANDING[status])


def blocks_as_read(
    blocks: Sequence[Block],
    status: AskStatus | None,
    ending: dict[str, Any] | None = None,
    withdrawn_reason: str = "",
    answer: AskAnswerBlock | None = None,
) -> tuple[Block, ...]:
    """Blocks as read: an ask's answered/cancelled follow its standing, an
    ended ask carries its ending, and an answered one its answer (`answer`,
    the answering message's snapshot), as a channel ask does. A replaced ask
    reads cancelled: the agent's newer ask took it back."""
    if status is None:
        return tuple(blocks)
    return tuple(
        Ask(
            questions=answer.questions
            if answer is not None and status is AskStatus.ANSWERED
            else b.questions,
            ask_id=b.ask_id,
            answered=status is AskStatus.ANSWERED,
            cancelled=status in (AskStatus.WITHDRAWN, AskStatus.REPLACED),
            ending=_ending(status, ending, withdrawn_reason),
        )
        if isinstance(b, Ask)
        else b
        for b in blocks
    )


def _message(row: dict[str, Any]) -> InboxMessage:
    status = AskStatus(row["ask_status"]) if row["ask_status"] else None
    answer = None
    if status is AskStatus.ANSWERED and row.get("answer_blocks"):
        answer = next(
            (
                b
                for b in blockrules.blocks_from_json(row["answer_blocks"])
                if isinstance(b, AskAnswerBlock)
            ),
            None,
        )
    return InboxMessage(
        message_id=row["id"],
        item_id=row["item_id"],
        author_id=row["author_id"],
        author_handle=row["author_handle"],
        blocks=blocks_as_read(
            blockrules.blocks_from_json(row["blocks"]),
            status,
            row.get("ending"),
            row["withdrawn_reason"],
            answer,
        ),
        created_at=row["created_at"],
        position=row["position"],
        ask_status=status,
        withdrawn_reason=row["withdrawn_reason"],
        attachments=tuple(
            Attachment(uuid.UUID(a[0]), a[1], a[2], a[3]) for a in row["attachments"]
        ),
    )


def _text_blocks(text: str) -> list[Block]:
    """The text as a block, checked by the message rules; none when empty."""
    if not text:
        return []
    checked, _ = blockrules.prepare_for_append([TextBlock(text)])
    return checked


class InboxStore:
    def __init__(
        self,
        db: Database,
        *,
        max_open_per_agent: int = rules.MAX_OPEN_PER_AGENT,
        thread_bytes: int = rules.MAX_THREAD_BYTES,
    ) -> None:
        self.db = db
        self.max_open_per_agent = max_open_per_agent
        self.thread_bytes = thread_bytes

    # --- reading and locking ----------------------------------------------------

    async def _item(self, conn: Conn, item_id: uuid.UUID) -> InboxItem:
        row = await (await conn.execute(INBOX["item"], {"id": item_id})).fetchone()
        if row is None:
            raise Corrupt(f"inbox item {item_id} vanished under its lock")
        return _item(row)

    # Every write locks the agent's row before the item's: the open bound and
    # the agent's presence are the agent's, and one lock order can't deadlock.

    async def _lock_as_viewer(self, conn: Conn, actor: Actor, item_id: uuid.UUID) -> InboxItem:
        cur = await conn.execute(
            INBOX["item_agent_as_viewer"], {"id": item_id, "viewer": actor.account_id}
        )
        row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no inbox item {item_id}")
        await conn.execute(INBOX["lock_agent"], {"agent_id": row["agent_id"]})
        cur = await conn.execute(
            INBOX["lock_item_as_viewer"], {"id": item_id, "viewer": actor.account_id}
        )
        if await cur.fetchone() is None:
            raise NotFound(f"no inbox item {item_id}")
        return await self._item(conn, item_id)

    async def _lock_by_key(self, conn: Conn, agent: Actor, key: str) -> InboxItem:
        rules.check_key(key)
        await conn.execute(INBOX["lock_agent"], {"agent_id": agent.account_id})
        cur = await conn.execute(
            INBOX["lock_item_by_key"], {"agent_id": agent.account_id, "key": key}
        )
        row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no inbox item under key {quoted(key)}")
        return await self._item(conn, row["id"])

    async def _message(self, conn: Conn, message_id: uuid.UUID) -> InboxMessage:
        row = await (await conn.execute(INBOX["message"], {"id": message_id})).fetchone()
        if row is None:
            raise Corrupt(f"inbox message {message_id} vanished under its item's lock")
        return _message(row)

    # --- writing ----------------------------------------------------------------

    async def _insert_message(
        self,
        conn: Conn,
        item: uuid.UUID,
        author: Actor,
        blocks: Sequence[Block],
        pictures: Sequence[CheckedPicture],
        *,
        answers: uuid.UUID | None = None,
        client_key: str | None = None,
    ) -> InboxMessage:
        message_id = uuid.uuid4()
        attachments = tuple(
            Attachment(uuid.uuid4(), p.name, p.content_type, len(p.data)) for p in pictures
        )
        if attachments:
            addresses = {a.name: inbox_pictures.address(item, a.attachment_id) for a in attachments}
            blocks = [
                TextBlock(inbox_pictures.draw(b.text, addresses)) if isinstance(b, TextBlock) else b
                for b in blocks
            ]
        ask = next((b for b in blocks if isinstance(b, Ask)), None)
        blocks_json = blockrules.blocks_to_json(blocks)
        blockrules.check_message_size(blocks_json)
        row = await (
            await conn.execute(
                INBOX["insert_message"],
                {
                    "id": message_id,
                    "item_id": item,
                    "author_id": author.account_id,
                    "blocks": Jsonb(blocks_json),
                    "ask_id": ask.ask_id if ask else None,
                    "ask_status": AskStatus.OPEN.value if ask else None,
                    "answers_message_id": answers,
                    "client_key": client_key,
                },
            )
        ).fetchone()
        assert row is not None
        if pictures:
            await conn.execute(
                INBOX["insert_files"],
                {
                    "item_id": item,
                    "message_id": message_id,
                    "ids": [a.attachment_id for a in attachments],
                    "names": [p.name for p in pictures],
                    "types": [p.content_type for p in pictures],
                    "data": [p.data for p in pictures],
                },
            )
        return InboxMessage(
            message_id=message_id,
            item_id=item,
            author_id=author.account_id,
            author_handle=row["author_handle"],
            blocks=tuple(blocks),
            created_at=row["created_at"],
            position=row["position"],
            ask_status=AskStatus.OPEN if ask else None,
            attachments=attachments,
        )

    async def _set_item(
        self, conn: Conn, item: InboxItem, state: rules.ItemState, title: str | None = None
    ) -> InboxItem:
        await conn.execute(
            INBOX["set_item"],
            {
                "id": item.item_id,
                "title": item.title if title is None else title,
                "status": state.status.value,
                "revision": state.revision,
                "ask_message_id": state.ask_message_id,
                "answered_by": state.answered_by,
                "closed_by": state.closed_by,
            },
        )
        return await self._item(conn, item.item_id)

    async def _close(
        self, conn: Conn, item: InboxItem, by: Actor, reason: str | None, surface: Surface | None
    ) -> tuple[InboxItem, bool]:
        """Withdraws the open ask. The agent's close keeps its reason and moves
        the revision; a member's has no reason. A repeat changes nothing."""
        if item.status is InboxStatus.CLOSED:
            return item, False
        _require_open(item, "close")
        asked = item.ask_message_id
        assert asked is not None
        by_agent = reason is not None
        await self._end_ask(
            conn,
            asked,
            AskStatus.WITHDRAWN,
            EndingKind.WITHDRAWN_BY_AGENT if by_agent else EndingKind.WITHDRAWN_BY_PERSON,
            by,
            surface,
            reason or "",
        )
        item = await self._set_item(
            conn, item, rules.closed(item.state, by.account_id, by_agent=by_agent)
        )
        # Those who hear of it read the withdrawn ask's message: its ending
        # says who and why.
        await self._publish(conn, item, by, await self._message(conn, asked), settled=True)
        return item, True

    async def _end_ask(
        self,
        conn: Conn,
        message_id: uuid.UUID,
        status: AskStatus,
        kind: EndingKind,
        by: Actor,
        surface: Surface | None,
        reason: str = "",
    ) -> None:
        """Ends the ask of a message: its standing and its ending, who, when,
        through which surface and why."""
        await conn.execute(
            INBOX["end_ask"],
            {
                "id": message_id,
                "status": status.value,
                # The inbox's own field keeps only the agent's reason, as before.
                "withdrawn_reason": reason if kind is EndingKind.WITHDRAWN_BY_AGENT else None,
                "kind": kind.value,
                "actor": by.account_id,
                "surface": surface.value if surface else None,
                "reason": reason,
            },
        )

    async def _publish(
        self,
        conn: Conn,
        item: InboxItem,
        actor: Actor,
        message: InboxMessage | None = None,
        *,
        settled: bool = False,
    ) -> None:
        """Appends the item's change; `settled` when the item opened or closed,
        which can move its agent's presence."""
        cur = await conn.execute(INBOX["audience"], {"agent_id": item.agent_id})
        audience = tuple(sorted(r["account_id"] for r in await cur.fetchall()))
        events = PendingEvents()
        events.inbox(
            InboxChange(
                item_id=item.item_id,
                agent_id=item.agent_id,
                key=item.key,
                revision=item.revision,
                status=item.status,
                actor_id=actor.account_id,
                audience=audience,
                message=message,
            )
        )
        if settled:
            await events.presence(conn, item.agent_id)
        await events.append(conn)

    # --- the agent's side ---------------------------------------------------------

    async def post(
        self,
        agent: Actor,
        key: str,
        title: str,
        body: str,
        ask: Ask | None = None,
        pictures: Sequence[Picture] = (),
        *,
        surface: Surface | None = None,
    ) -> tuple[InboxItem, InboxMessage]:
        """The agent's message under its key, creating the item if new. With an
        ask, every ask the thread held open is replaced (ending replaced, by
        the agent through `surface`), the item points at the new one and its
        revision moves; without one it only appends, and under a new key it
        is a settled note that waits on nobody."""
        _agent(agent)
        rules.check_key(key)
        rules.check_title(title)
        if not body and ask is None:
            raise InvalidArgument("a post needs a body, an ask, or both")
        if ask is not None and (ask.deadline or ask.timeout or ask.answerer_ids or ask.quorum):
            # Its readers are the agent's owner and those granted, and its
            # agent closes or replaces it itself.
            raise InvalidArgument(
                "an inbox ask takes no deadline, names no answerers and needs no quorum"
            )
        blocks = _text_blocks(body)
        if ask is not None:
            prepared, _ = blockrules.prepare_for_append([ask])
            blocks.extend(prepared)
        checked = check_pictures(pictures)
        async with self.db.tx(agent) as conn:
            if ask is not None:
                await conn.execute(INBOX["lock_agent"], {"agent_id": agent.account_id})
            row = await (
                await conn.execute(
                    INBOX["upsert_item"],
                    {
                        "id": uuid.uuid4(),
                        "agent_id": agent.account_id,
                        "key": key,
                        "title": title or key,
                    },
                )
            ).fetchone()
            assert row is not None
            item = await self._item(conn, row["id"])
            state = item.state
            opens = ask is not None and item.status is not InboxStatus.OPEN
            if opens:
                await self._check_open_bound(conn, agent.account_id, item.item_id)
            if ask is not None:
                await conn.execute(
                    INBOX["replace_open_asks"],
                    {
                        "item_id": item.item_id,
                        "actor": agent.account_id,
                        "surface": surface.value if surface else None,
                    },
                )
            message = await self._insert_message(conn, item.item_id, agent, blocks, checked)
            if ask is not None:
                state = rules.asked(state, message.message_id)
            item = await self._set_item(conn, item, state, title or None)
            await self._publish(conn, item, agent, message, settled=opens)
        return item, message

    async def _check_open_bound(self, conn: Conn, agent_id: uuid.UUID, item_id: uuid.UUID) -> None:
        """RESOURCE_EXHAUSTED when opening this item would pass the bound; the
        caller holds the agent's lock, so racing openers count one another."""
        cur = await conn.execute(INBOX["count_open"], {"agent_id": agent_id, "item_id": item_id})
        row = await cur.fetchone()
        assert row is not None
        if row["n"] >= self.max_open_per_agent:
            raise ResourceExhausted(
                f"the agent already has {row['n']} inbox items waiting on an answer; the "
                f"limit is {self.max_open_per_agent}: close or settle one first"
            )

    async def reply_as_agent(
        self, agent: Actor, key: str, text: str, pictures: Sequence[Picture] = ()
    ) -> tuple[InboxItem, InboxMessage]:
        """A message without an ask on the agent's own item."""
        _agent(agent)
        blocks, checked = _reply_parts(text, pictures)
        async with self.db.tx(agent) as conn:
            item = await self._lock_by_key(conn, agent, key)
            return await self._append_reply(conn, item, agent, blocks, checked)

    async def close_as_agent(
        self, agent: Actor, key: str, reason: str, *, surface: Surface | None = None
    ) -> tuple[InboxItem, bool]:
        """Withdraws the open ask, keeping the reason, and moves the revision.
        A repeat close changes nothing and returns changed=False."""
        _agent(agent)
        rules.check_reason(reason)
        async with self.db.tx(agent) as conn:
            item = await self._lock_by_key(conn, agent, key)
            return await self._close(conn, item, agent, reason, surface)

    # --- people's side ------------------------------------------------------------

    async def grant(self, owner: Actor, agent_id: uuid.UUID, account_id: uuid.UUID) -> None:
        """Lets another person of the workspace see and answer the agent's inbox."""
        async with self.db.tx(owner) as conn:
            row = await (await conn.execute(INBOX["agent_of"], {"id": agent_id})).fetchone()
            if row is None:
                raise NotFound(f"no agent {agent_id}")
            if row["owner_id"] != owner.account_id:
                raise PermissionDenied("only the agent's owner grants its inbox")
            if await (await conn.execute(INBOX["human"], {"id": account_id})).fetchone() is None:
                raise NotFound(f"no person {account_id}")
            await conn.execute(INBOX["grant"], {"agent_id": agent_id, "account_id": account_id})

    async def list_items(
        self,
        actor: Actor,
        statuses: Sequence[InboxStatus] = (),
        agent_id: uuid.UUID | None = None,
        size: int = 0,
        token: str = "",
    ) -> Page[InboxItem]:
        """Items of the agents the actor sees, most recently changed first."""
        limit = page_size(size)
        before_updated = datetime.datetime.max.replace(tzinfo=datetime.UTC)
        before_id = uuid.UUID(int=(1 << 128) - 1)
        if token:
            updated, iid = _decode_token(token, 2)
            try:
                before_updated, before_id = datetime.datetime.fromisoformat(updated), uuid.UUID(iid)
            except ValueError:
                raise InvalidArgument("page_token is not one this server issued") from None
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(
                INBOX["list_items"],
                {
                    "viewer": actor.account_id,
                    "statuses": sorted({s.value for s in statuses}),
                    "agent_id": agent_id,
                    "before_updated": before_updated,
                    "before_id": before_id,
                    "limit": limit + 1,
                },
            )
            rows = await cur.fetchall()
        items = [_item(r) for r in rows[:limit]]
        next_token = ""
        if len(rows) > limit:
            next_token = _encode_token(items[-1].updated_at.isoformat(), items[-1].item_id)
        return Page(items, next_token)

    async def read_thread(
        self, actor: Actor, item_id: uuid.UUID, limit: int = 0, token: str = ""
    ) -> InboxThread:
        """One page of the item's thread (see plan_page)."""
        return await self.read_page(actor, await self.plan_page(actor, item_id, limit, token))

    async def plan_page(
        self, actor: Actor, item_id: uuid.UUID, limit: int = 0, token: str = ""
    ) -> PagePlan:
        """Which messages a page holds, read without their blocks. Its run: the
        latest `limit` messages before the token's place, within thread_bytes
        as stored, the newest always. A first page also holds the thread's
        first and open-ask message when they are older than its run (pinned,
        counted in its bytes); a later page brings them again in their place."""
        n = rules.thread_read(limit)
        before = _page_before(token, item_id)
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(
                INBOX["visible_item"], {"id": item_id, "viewer": actor.account_id}
            )
            if await cur.fetchone() is None:
                raise NotFound(f"no inbox item {item_id}")
            cur = await conn.execute(
                INBOX["thread_run"],
                {"item_id": item_id, "before": before or _NO_POSITION, "limit": n + 1},
            )
            candidates = await cur.fetchall()
            pinned = []
            if before is None:
                cur = await conn.execute(INBOX["thread_pinned"], {"item_id": item_id})
                pinned = await cur.fetchall()
            cur = await conn.execute(INBOX["thread_total"], {"item_id": item_id})
            total_row = await cur.fetchone()
        reserved = {r["position"] for r in pinned}
        used = sum(r["bytes"] for r in pinned)
        run: list[dict[str, Any]] = []
        for r in candidates[:n]:
            weight = 0 if r["position"] in reserved else r["bytes"]
            if run and used + weight > self.thread_bytes:
                break
            used += weight
            run.append(r)
        oldest = run[-1]["position"] if run else None
        extra = [r for r in pinned if oldest is not None and r["position"] < oldest]
        more = len(candidates) > len(run)
        return PagePlan(
            item_id,
            [r["id"] for r in extra] + [r["id"] for r in reversed(run)],
            len(extra),
            used,
            total_row["total"] if total_row else 0,
            _encode_token(item_id, oldest) if more and oldest is not None else "",
        )

    async def read_page(self, actor: Actor, plan: PagePlan) -> InboxThread:
        """The item and the messages of a planned page, as they stand now (one
        taken back since is left out)."""
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(
                INBOX["visible_item"], {"id": plan.item_id, "viewer": actor.account_id}
            )
            if await cur.fetchone() is None:
                raise NotFound(f"no inbox item {plan.item_id}")
            item = await self._item(conn, plan.item_id)
            rows = []
            if plan.message_ids:
                cur = await conn.execute(
                    INBOX["thread_messages"], {"item_id": plan.item_id, "ids": plan.message_ids}
                )
                rows = await cur.fetchall()
        by_id = {r["id"]: _message(r) for r in rows}
        messages = [by_id[i] for i in plan.message_ids if i in by_id]
        pinned = sum(1 for i in plan.message_ids[: plan.pinned] if i in by_id)
        return InboxThread(item, messages, plan.total, plan.next_page_token, pinned)

    async def answer(
        self,
        actor: Actor,
        item_id: uuid.UUID,
        answers: Sequence[Answer],
        client_key: str,
        text: str = "",
        files: Sequence[Picture] = (),
        expected_revision: int | None = None,
        ask_id: str = "",
        *,
        surface: Surface | None = None,
    ) -> AnswerResult:
        """Answers the item's open ask, checked by the ask's rules. The outcome
        is TAKEN, REPEATED (this client key answered already), NOT_OPEN or
        REFUSED with the reason; only TAKEN writes. The revision stays."""
        _member(actor)
        rules.check_client_key(client_key)
        text_blocks = _text_blocks(text)
        checked = check_pictures(files)
        async with self.db.tx(actor) as conn:
            item = await self._lock_as_viewer(conn, actor, item_id)
            cur = await conn.execute(
                INBOX["answer_by_client_key"], {"item_id": item_id, "client_key": client_key}
            )
            held = await cur.fetchone()
            if held is not None:
                return AnswerResult(
                    AnswerOutcome.REPEATED,
                    item,
                    "this client_key answered already; the first answer stands",
                    await self._message(conn, held["id"]),
                )
            not_open = await self._not_open(conn, item, expected_revision, ask_id)
            if not_open:
                return AnswerResult(AnswerOutcome.NOT_OPEN, item, not_open)
            assert item.ask_message_id is not None
            ask_message = await self._message(conn, item.ask_message_id)
            ask = ask_message.ask
            if ask is None:
                raise Corrupt(f"inbox message {item.ask_message_id} has no ask")
            try:
                taken = blockrules.apply_answers(ask, answers)
            except InvalidArgument as exc:
                return AnswerResult(AnswerOutcome.REFUSED, item, exc.message)
            snapshot = AskAnswerBlock(ask.ask_id, ask_message.message_id, taken.questions)
            message = await self._insert_message(
                conn,
                item_id,
                actor,
                [*text_blocks, snapshot],
                checked,
                answers=ask_message.message_id,
                client_key=client_key,
            )
            await self._end_ask(
                conn,
                ask_message.message_id,
                AskStatus.ANSWERED,
                EndingKind.ANSWERED,
                actor,
                surface,
            )
            item = await self._set_item(conn, item, rules.answered(item.state, actor.account_id))
            await self._publish(conn, item, actor, message, settled=True)
        return AnswerResult(AnswerOutcome.TAKEN, item, message=message)

    async def _not_open(
        self, conn: Conn, item: InboxItem, expected_revision: int | None, ask_id: str
    ) -> str:
        """Why the answer finds no open ask, or "" when it does."""
        if ask_id and ask_id != item.ask_id:
            cur = await conn.execute(
                INBOX["ask_standing"], {"item_id": item.item_id, "ask_id": ask_id}
            )
            row = await cur.fetchone()
            if row is None:
                return f"this item has no ask {quoted(ask_id)}"
            return f"ask {quoted(ask_id)} is {row['ask_status']}"
        if item.status is not InboxStatus.OPEN:
            if item.ask_status is AskStatus.DECLINED:
                return "the ask was declined"
            return {
                InboxStatus.ANSWERED: "the ask is answered already",
                InboxStatus.CLOSED: "the ask was withdrawn",
                InboxStatus.NOTE: "this item is a note; it asks nothing",
            }[item.status]
        if expected_revision is not None and expected_revision != item.revision:
            return (
                f"the item moved on to revision {item.revision} (the answer was for "
                f"{expected_revision}); read it again"
            )
        return ""

    async def reply(
        self, actor: Actor, item_id: uuid.UUID, text: str, files: Sequence[Picture] = ()
    ) -> tuple[InboxItem, InboxMessage]:
        """A person's message without an ask; it moves no revision."""
        _member(actor)
        blocks, checked = _reply_parts(text, files)
        async with self.db.tx(actor) as conn:
            item = await self._lock_as_viewer(conn, actor, item_id)
            return await self._append_reply(conn, item, actor, blocks, checked)

    async def _append_reply(
        self,
        conn: Conn,
        item: InboxItem,
        author: Actor,
        blocks: Sequence[Block],
        pictures: Sequence[CheckedPicture],
    ) -> tuple[InboxItem, InboxMessage]:
        message = await self._insert_message(conn, item.item_id, author, blocks, pictures)
        item = await self._set_item(conn, item, item.state)
        await self._publish(conn, item, author, message)
        return item, message

    async def close(
        self, actor: Actor, item_id: uuid.UUID, *, surface: Surface | None = None
    ) -> tuple[InboxItem, bool]:
        """A member's close: withdraws the open ask with no reason (ending
        withdrawn_by_person), writes no message, moves no revision and names
        the member as the closer. A repeat close changes nothing and returns
        changed=False."""
        _member(actor)
        async with self.db.tx(actor) as conn:
            item = await self._lock_as_viewer(conn, actor, item_id)
            return await self._close(conn, item, actor, None, surface)

    async def decline(
        self, actor: Actor, item_id: uuid.UUID, reason: str = "", *, surface: Surface | None = None
    ) -> InboxItem:
        """A person declines the item's open ask, with an optional reason the
        agent hears: the ask ends declined, the item is closed by the person
        and its revision stays; no message is written. Refusals in the order
        visibility, state, reason."""
        _member(actor)
        async with self.db.tx(actor) as conn:
            item = await self._lock_as_viewer(conn, actor, item_id)
            _require_open(item, "decline")
            if item.status is InboxStatus.CLOSED:
                ended = "declined" if item.ask_status is AskStatus.DECLINED else "closed"
                raise Conflict(f"inbox item {item_id} is already {ended}; nothing to decline")
            blockrules.check_reason(reason)
            asked = item.ask_message_id
            assert asked is not None
            await self._end_ask(
                conn, asked, AskStatus.DECLINED, EndingKind.DECLINED, actor, surface, reason
            )
            item = await self._set_item(
                conn, item, rules.closed(item.state, actor.account_id, by_agent=False)
            )
            # The agent hears the declined ask, its ending saying who and why;
            # its presence follows, as after every other ending.
            await self._publish(conn, item, actor, await self._message(conn, asked), settled=True)
        return item

    async def take_back_answer(self, actor: Actor, item_id: uuid.UUID) -> InboxItem:
        """Undoes a failed hand-off: deletes the answering message and its
        files and reopens the ask at the same revision. Only its answerer may."""
        _member(actor)
        async with self.db.tx(actor) as conn:
            item = await self._lock_as_viewer(conn, actor, item_id)
            if item.status is not InboxStatus.ANSWERED:
                raise Conflict(f"inbox item {item_id} holds no answer to take back")
            if item.answered_by != actor.account_id:
                raise PermissionDenied("only the person who answered can take the answer back")
            await self._check_open_bound(conn, item.agent_id, item.item_id)
            assert item.ask_message_id is not None
            cur = await conn.execute(INBOX["answer_of"], {"ask_message_id": item.ask_message_id})
            answer = await cur.fetchone()
            if answer is None:
                raise Corrupt(f"answered inbox item {item_id} has no answering message")
            await conn.execute(INBOX["delete_message"], {"id": answer["id"]})
            await conn.execute(INBOX["reopen_ask"], {"id": item.ask_message_id})
            item = await self._set_item(conn, item, rules.reopened(item.state))
            await self._publish(conn, item, actor, settled=True)
        return item

    async def reopen(self, actor: Actor, item_id: uuid.UUID) -> InboxItem:
        """Takes a member's close back: the same ask waits again. Only the
        member who closed may; an agent's close stands."""
        _member(actor)
        async with self.db.tx(actor) as conn:
            item = await self._lock_as_viewer(conn, actor, item_id)
            if item.status is not InboxStatus.CLOSED:
                raise Conflict(f"inbox item {item_id} is not closed")
            if item.closed_by != actor.account_id:
                raise PermissionDenied("only the person who closed the item can reopen it")
            await self._check_open_bound(conn, item.agent_id, item.item_id)
            assert item.ask_message_id is not None
            await conn.execute(INBOX["reopen_ask"], {"id": item.ask_message_id})
            item = await self._set_item(conn, item, rules.reopened(item.state))
            await self._publish(conn, item, actor, settled=True)
        return item

    async def ask_message(self, actor: Actor, message_id: uuid.UUID) -> InboxMessage:
        """A thread message that holds an ask, as it stands, for someone who
        reads its item."""
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(
                INBOX["ask_message_as_viewer"], {"id": message_id, "viewer": actor.account_id}
            )
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no inbox ask message {message_id}")
        return _message(row)

    async def get_attachment(
        self, actor: Actor, item_id: uuid.UUID, attachment_id: uuid.UUID
    ) -> tuple[Attachment, bytes]:
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(
                INBOX["file"], {"id": attachment_id, "item_id": item_id, "viewer": actor.account_id}
            )
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no attachment {attachment_id} on inbox item {item_id}")
        return Attachment(row["id"], row["name"], row["content_type"], row["size_bytes"]), bytes(
            row["data"]
        )


def _member(actor: Actor) -> None:
    # Agents never answer asks, and a member's close is a person's act.
    if actor.kind is not AccountKind.HUMAN:
        raise PermissionDenied("only a person answers, replies to or closes an inbox item here")


def _agent(actor: Actor) -> None:
    if actor.kind is not AccountKind.AGENT:
        raise PermissionDenied("only an agent posts to, replies in or closes its own inbox")


def _require_open(item: InboxItem, verb: str) -> None:
    if item.status is InboxStatus.ANSWERED:
        raise Conflict(f"inbox item {item.item_id} is already answered; nothing to {verb}")
    if item.status is InboxStatus.NOTE:
        raise Conflict(f"inbox item {item.item_id} is a note; it asks nothing to {verb}")


def _reply_parts(
    text: str, pictures: Sequence[Picture]
) -> tuple[list[Block], list[CheckedPicture]]:
    if not text and not pictures:
        raise InvalidArgument("a reply needs text, pictures, or both")
    return _text_blocks(text), check_pictures(pictures)
