"""InboxService: people read and answer agents' inboxes, on every transport;
and the relay arms an agent posts, replies and closes with."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterable

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import inbox_pb2 as ib
from compass_server.api import mapping as wire
from compass_server.api import surface
from compass_server.api.auth import Authenticator
from compass_server.events.hub import Budget
from compass_server.inbox import pictures as inbox_pictures
from compass_server.inbox import rules
from compass_server.inbox.pictures import Picture
from compass_server.receipts import Receipts
from compass_server.store import InvalidArgument, PermissionDenied, ResourceExhausted
from compass_server.store.ids import parse_id
from compass_server.store.inbox import AnswerOutcome, AnswerResult, InboxItem, InboxStore
from compass_server.store.types import (
    AccountKind,
    Actor,
    AskStatus,
    Attachment,
    InboxMessage,
    InboxStatus,
    Surface,
)

_STATUS_FROM_WIRE = {v: k for k, v in wire.INBOX_STATUS_TO_WIRE.items()}
_ASK_STATUS_TO_WIRE = {
    AskStatus.OPEN: ib.INBOX_ASK_STATUS_OPEN,
    AskStatus.REPLACED: ib.INBOX_ASK_STATUS_REPLACED,
    AskStatus.ANSWERED: ib.INBOX_ASK_STATUS_ANSWERED,
    AskStatus.WITHDRAWN: ib.INBOX_ASK_STATUS_WITHDRAWN,
    AskStatus.DECLINED: ib.INBOX_ASK_STATUS_DECLINED,
}
_OUTCOME_TO_WIRE = {
    AnswerOutcome.TAKEN: ib.INBOX_ANSWER_OUTCOME_TAKEN,
    AnswerOutcome.REPEATED: ib.INBOX_ANSWER_OUTCOME_REPEATED,
    AnswerOutcome.NOT_OPEN: ib.INBOX_ANSWER_OUTCOME_NOT_OPEN,
    AnswerOutcome.REFUSED: ib.INBOX_ANSWER_OUTCOME_REFUSED,
}


# --- wire ⇄ store ----------------------------------------------------------------


def item_to_wire(i: InboxItem) -> ib.InboxItem:
    out = ib.InboxItem(
        item_id=str(i.item_id),
        agent_account_id=str(i.agent_id),
        agent_handle=i.agent_handle,
        key=i.key,
        title=i.title,
        status=wire.INBOX_STATUS_TO_WIRE[i.status],
        revision=i.revision,
        ask_id=i.ask_id,
        close_reason=i.close_reason,
        answered_by_account_id=str(i.answered_by) if i.answered_by else "",
        closed_by_account_id=str(i.closed_by) if i.closed_by else "",
        created_at=wire.timestamp(i.created_at),
        updated_at=wire.timestamp(i.updated_at),
    )
    if i.settled_at is not None:
        out.settled_at.CopyFrom(wire.timestamp(i.settled_at))
    return out


def attachment_to_wire(item_id: uuid.UUID, a: Attachment) -> ib.InboxAttachment:
    return ib.InboxAttachment(
        attachment_id=str(a.attachment_id),
        name=a.name,
        content_type=a.content_type,
        size_bytes=a.size_bytes,
        address=inbox_pictures.address(item_id, a.attachment_id),
    )


def message_to_wire(m: InboxMessage, stamp: wire.Stamp | None = None) -> ib.InboxMessage:
    """With `stamp`, an ended ask carries its receipt."""
    return ib.InboxMessage(
        message=wire.inbox_message_to_message(m, stamp),
        ask_status=_ASK_STATUS_TO_WIRE[m.ask_status]
        if m.ask_status
        else ib.INBOX_ASK_STATUS_UNSPECIFIED,
        withdrawn_reason=m.withdrawn_reason,
        attachments=[attachment_to_wire(m.item_id, a) for a in m.attachments],
    )


def files_from_wire(files: Iterable[ib.InboxFile]) -> list[Picture]:
    return [Picture(f.name, f.data) for f in files]


def statuses_from_wire(values: Iterable[int]) -> list[InboxStatus]:
    out = []
    for v in values:
        status = _STATUS_FROM_WIRE.get(v)  # type: ignore[call-overload]
        if status is None:
            raise InvalidArgument(f"statuses has {v}, which is no inbox item status")
        out.append(status)
    return out


def answer_to_wire(result: AnswerResult) -> ib.AnswerInboxAskResponse:
    out = ib.AnswerInboxAskResponse(
        outcome=_OUTCOME_TO_WIRE[result.outcome],
        reason=result.reason,
        item=item_to_wire(result.item),
    )
    if result.message is not None:
        out.answer.CopyFrom(message_to_wire(result.message))
    return out


def _person(actor: Actor) -> Actor:
    if actor.kind is not AccountKind.HUMAN:
        raise PermissionDenied("the inbox service is for people; an agent uses the relay")
    return actor


class InboxApi:
    def __init__(
        self,
        inbox: InboxStore,
        *,
        reading_bytes: int = rules.READING_BYTES,
        reading_bytes_per_account: int = rules.READING_BYTES_PER_ACCOUNT,
        read_wait_seconds: float = rules.READ_WAIT_SECONDS,
        receipts: Receipts | None = None,
    ) -> None:
        self.inbox = inbox
        # Ended asks of a thread carry their receipts (empty without keys).
        self.receipts = receipts or Receipts(None, "")
        # The pages of thread reads held at once, in bytes as stored, so many
        # reads of long threads can't take the process's memory.
        self.reading = Budget(reading_bytes, reading_bytes_per_account)
        self.read_wait_seconds = read_wait_seconds

    @contextlib.asynccontextmanager
    async def _reading(self, account_id: uuid.UUID, n: int) -> AsyncIterator[None]:
        try:
            async with asyncio.timeout(self.read_wait_seconds):
                await self.reading.take(account_id, n)
        except TimeoutError:
            raise ResourceExhausted(
                "too many long threads are being read at once; try again in a moment"
            ) from None
        try:
            yield
        finally:
            self.reading.give(account_id, n)

    async def list_inbox_items(
        self, actor: Actor, req: ib.ListInboxItemsRequest
    ) -> ib.ListInboxItemsResponse:
        page = await self.inbox.list_items(
            _person(actor),
            statuses_from_wire(req.statuses),
            wire.optional_id(req.agent_account_id, "agent_account_id"),
            req.page_size,
            req.page_token,
        )
        return ib.ListInboxItemsResponse(
            items=[item_to_wire(i) for i in page.items], next_page_token=page.next_page_token
        )

    async def get_inbox_item(
        self, actor: Actor, req: ib.GetInboxItemRequest
    ) -> ib.GetInboxItemResponse:
        person = _person(actor)
        plan = await self.inbox.plan_page(
            person, parse_id(req.item_id, "item_id"), req.message_limit, req.page_token
        )
        # The page's bytes are held from its read until its answer is built.
        async with self._reading(person.account_id, max(1, plan.bytes)):
            thread = await self.inbox.read_page(person, plan)
            stamp = self.receipts.stamp(person.workspace_id)
            return ib.GetInboxItemResponse(
                item=item_to_wire(thread.item),
                thread=[message_to_wire(m, stamp) for m in thread.messages],
                total_messages=thread.total,
                next_page_token=thread.next_page_token,
                pinned_messages=thread.pinned,
            )

    async def answer_inbox_ask(
        self, actor: Actor, req: ib.AnswerInboxAskRequest
    ) -> ib.AnswerInboxAskResponse:
        result = await self.inbox.answer(
            _person(actor),
            parse_id(req.item_id, "item_id"),
            wire.answers_from_wire(req.answers),
            req.client_key,
            req.text,
            files_from_wire(req.files),
            req.expected_revision if req.HasField("expected_revision") else None,
            req.ask_id,
            surface=Surface.INBOX,
        )
        return answer_to_wire(result)

    async def reply_inbox_item(
        self, actor: Actor, req: ib.ReplyInboxItemRequest
    ) -> ib.ReplyInboxItemResponse:
        item, message = await self.inbox.reply(
            _person(actor), parse_id(req.item_id, "item_id"), req.text, files_from_wire(req.files)
        )
        return ib.ReplyInboxItemResponse(item=item_to_wire(item), message=message_to_wire(message))

    async def close_inbox_item(
        self, actor: Actor, req: ib.CloseInboxItemRequest
    ) -> ib.CloseInboxItemResponse:
        item, _ = await self.inbox.close(
            _person(actor), parse_id(req.item_id, "item_id"), surface=Surface.INBOX
        )
        return ib.CloseInboxItemResponse(item=item_to_wire(item))

    async def decline_inbox_ask(
        self, actor: Actor, req: ib.DeclineInboxAskRequest
    ) -> ib.DeclineInboxAskResponse:
        item = await self.inbox.decline(
            _person(actor), parse_id(req.item_id, "item_id"), req.reason, surface=Surface.INBOX
        )
        return ib.DeclineInboxAskResponse(item=item_to_wire(item))

    async def take_back_inbox_answer(
        self, actor: Actor, req: ib.TakeBackInboxAnswerRequest
    ) -> ib.TakeBackInboxAnswerResponse:
        item = await self.inbox.take_back_answer(_person(actor), parse_id(req.item_id, "item_id"))
        return ib.TakeBackInboxAnswerResponse(item=item_to_wire(item))

    async def reopen_inbox_item(
        self, actor: Actor, req: ib.ReopenInboxItemRequest
    ) -> ib.ReopenInboxItemResponse:
        item = await self.inbox.reopen(_person(actor), parse_id(req.item_id, "item_id"))
        return ib.ReopenInboxItemResponse(item=item_to_wire(item))

    async def get_inbox_attachment(
        self, actor: Actor, req: ib.GetInboxAttachmentRequest
    ) -> ib.GetInboxAttachmentResponse:
        item_id = parse_id(req.item_id, "item_id")
        attachment, data = await self.inbox.get_attachment(
            _person(actor), item_id, parse_id(req.attachment_id, "attachment_id")
        )
        return ib.GetInboxAttachmentResponse(
            attachment=attachment_to_wire(item_id, attachment), data=data
        )


class InboxFiles:
    """A picture's bytes at its address (`/inbox/<item>/files/<attachment>`),
    for plain HTTP clients with an account token; the same rules as
    GetInboxAttachment."""

    def __init__(self, auth: Authenticator, api: InboxApi) -> None:
        self.auth = auth
        self.api = api

    async def get(
        self, authorization: str | None, item_id: str, attachment_id: str
    ) -> tuple[str, bytes]:
        actor = (await self.auth.sign_in(authorization, "account")).principal
        assert isinstance(actor, Actor)
        r = await self.api.get_inbox_attachment(
            actor, ib.GetInboxAttachmentRequest(item_id=item_id, attachment_id=attachment_id)
        )
        return r.attachment.content_type, r.data


class AgentInboxApi:
    """The agent's side of its inbox, through the relay: post, reply, close,
    each under the agent's own key."""

    def __init__(self, inbox: InboxStore) -> None:
        self.inbox = inbox

    async def inbox_post(self, actor: Actor, req: gw.InboxPostRequest) -> gw.InboxPostResponse:
        item, message = await self.inbox.post(
            actor,
            req.key,
            req.title,
            req.body,
            wire.ask_from_wire(req.ask) if req.HasField("ask") else None,
            files_from_wire(req.pictures),
            surface=surface.current(),
        )
        return gw.InboxPostResponse(item=item_to_wire(item), message=message_to_wire(message))

    async def inbox_reply(self, actor: Actor, req: gw.InboxReplyRequest) -> gw.InboxReplyResponse:
        item, message = await self.inbox.reply_as_agent(
            actor, req.key, req.text, files_from_wire(req.pictures)
        )
        return gw.InboxReplyResponse(item=item_to_wire(item), message=message_to_wire(message))

    async def inbox_close(self, actor: Actor, req: gw.InboxCloseRequest) -> gw.InboxCloseResponse:
        item, _ = await self.inbox.close_as_agent(
            actor, req.key, req.reason, surface=surface.current()
        )
        return gw.InboxCloseResponse(item=item_to_wire(item))
