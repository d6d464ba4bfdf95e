"""InboxService end to end over gRPC, Connect binary and Connect JSON, and the
inbox events on Subscribe."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from connectrpc.errors import ConnectError
from google.protobuf.message import Message

from compass.v1 import comms_pb2 as pb
from compass.v1 import inbox_connect
from compass.v1 import inbox_pb2 as ib
from compass_server.inbox.pictures import Picture
from compass_server.store.types import Answer
from compass_server.transport.binding import snake
from tests.servers import CallError, GrpcClient, authorization
from tests.test_inbox_store import PNG, yes_no
from tests.world import World, two_question_ask

SERVICE = "compass.v1.InboxService"
GOOD = [
    pb.AskQuestionAnswer(question_id="db", chosen_option_ids=["pg"]),
    pb.AskQuestionAnswer(question_id="langs", chosen_option_ids=["py"], custom_text="+Rust"),
]


def _response_class(method: str) -> type[Message]:
    out = ib.DESCRIPTOR.services_by_name["InboxService"].methods_by_name[method].output_type
    return getattr(ib, out.name)  # type: ignore[no-any-return]


class InboxGrpc:
    def __init__(self, port: int) -> None:
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")

    async def close(self) -> None:
        await self.channel.close()

    async def call(self, method: str, request: Message, token: str | None) -> Any:
        rpc = self.channel.unary_unary(
            f"/{SERVICE}/{method}",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=_response_class(method).FromString,
        )
        value = authorization(token)
        metadata = [("authorization", value)] if value is not None else []
        try:
            return await rpc(request, metadata=metadata, timeout=30)
        except grpc.aio.AioRpcError as exc:
            raise CallError(exc.code().name.lower(), exc.details() or "") from None


class InboxConnect:
    def __init__(self, port: int, codec: str) -> None:
        from connectrpc.compat import google_protobuf_codecs

        codecs = {c.name(): c for c in google_protobuf_codecs()}
        self.client = inbox_connect.InboxServiceClient(
            f"http://127.0.0.1:{port}", codec=codecs[codec], timeout_ms=30_000
        )

    async def close(self) -> None:
        await self.client.close()

    async def call(self, method: str, request: Message, token: str | None) -> Any:
        value = authorization(token)
        headers = {"authorization": value} if value is not None else {}
        try:
            return await getattr(self.client, snake(method))(request, headers=headers)
        except ConnectError as exc:
            raise CallError(exc.code.value, exc.message) from None


Client = InboxGrpc | InboxConnect


@pytest.fixture(scope="session", params=["grpc", "json", "proto"])
async def inbox_client(request: pytest.FixtureRequest, server: Any) -> AsyncIterator[Client]:
    c: Client = (
        InboxGrpc(server.grpc_port)
        if request.param == "grpc"
        else InboxConnect(server.http_port, request.param)
    )
    yield c
    await c.close()


def tok(w: World, who: Any) -> str:
    return w.tokens[who.account_id]


async def expect(code: str, coro: Any) -> CallError:
    with pytest.raises(CallError) as info:
        await coro
    assert info.value.code == code, info.value
    assert "Traceback" not in info.value.message and "psycopg" not in info.value.message
    return info.value


async def test_read_answer_and_fetch_a_picture(
    inbox_client: Client, api_world: World, server: Any
) -> None:
    w, c, inbox = api_world, inbox_client, server.inbox
    item, posted = await inbox.post(
        w.agent, "deploy", "Deploy?", "See the chart", two_question_ask(), [_png("chart")]
    )
    await inbox.post(w.agent, "fyi", "FYI", "Build is green")
    h = tok(w, w.human)

    listed = await c.call("ListInboxItems", ib.ListInboxItemsRequest(), h)
    assert [i.key for i in listed.items] == ["fyi", "deploy"]
    open_only = await c.call(
        "ListInboxItems", ib.ListInboxItemsRequest(statuses=[pb.INBOX_ITEM_STATUS_OPEN]), h
    )
    (wire_item,) = open_only.items
    assert wire_item.item_id == str(item.item_id) and wire_item.revision == 1
    assert wire_item.agent_handle == "scout" and wire_item.ask_id == item.ask_id
    assert not wire_item.HasField("settled_at")

    got = await c.call("GetInboxItem", ib.GetInboxItemRequest(item_id=str(item.item_id)), h)
    (message,) = got.thread
    assert message.ask_status == ib.INBOX_ASK_STATUS_OPEN and got.total_messages == 1
    assert message.message.blocks[0].text.text == "See the chart"
    assert message.message.blocks[1].ask.ask_id == item.ask_id
    (attachment,) = message.attachments
    assert attachment.content_type == "image/png" and attachment.size_bytes == len(PNG)
    fetched = await c.call(
        "GetInboxAttachment",
        ib.GetInboxAttachmentRequest(
            item_id=str(item.item_id), attachment_id=attachment.attachment_id
        ),
        h,
    )
    assert fetched.data == PNG and fetched.attachment == attachment

    answer = ib.AnswerInboxAskRequest(
        item_id=str(item.item_id),
        answers=GOOD,
        text="ship it",
        client_key="k1",
        expected_revision=1,
        files=[ib.InboxFile(name="ok.gif", data=b"GIF89a....")],
    )
    taken = await c.call("AnswerInboxAsk", answer, h)
    assert taken.outcome == ib.INBOX_ANSWER_OUTCOME_TAKEN and taken.reason == ""
    assert taken.item.status == pb.INBOX_ITEM_STATUS_ANSWERED and taken.item.revision == 1
    assert taken.item.answered_by_account_id == str(w.human.account_id)
    assert taken.item.HasField("settled_at")
    snapshot = taken.answer.message.blocks[1].ask_answer
    assert snapshot.ask_id == item.ask_id and snapshot.ask_message_id == str(posted.message_id)
    assert list(snapshot.questions[1].chosen_option_ids) == ["py"]
    assert taken.answer.attachments[0].content_type == "image/gif"
    repeated = await c.call("AnswerInboxAsk", answer, h)
    assert repeated.outcome == ib.INBOX_ANSWER_OUTCOME_REPEATED
    assert repeated.answer.message.message_id == taken.answer.message.message_id
    answer.client_key = "k2"
    not_open = await c.call("AnswerInboxAsk", answer, h)
    assert not_open.outcome == ib.INBOX_ANSWER_OUTCOME_NOT_OPEN and "answered" in not_open.reason
    assert not not_open.HasField("answer")


async def test_refused_answers_and_take_backs_over_the_wire(
    inbox_client: Client, api_world: World, server: Any
) -> None:
    w, c, inbox = api_world, inbox_client, server.inbox
    item, _ = await inbox.post(w.agent, "k", "t", "", two_question_ask())
    h, iid = tok(w, w.human), str(item.item_id)
    refused = await c.call(
        "AnswerInboxAsk",
        ib.AnswerInboxAskRequest(item_id=iid, answers=GOOD[:1], client_key="k1"),
        h,
    )
    assert refused.outcome == ib.INBOX_ANSWER_OUTCOME_REFUSED and "missing" in refused.reason
    assert refused.item.status == pb.INBOX_ITEM_STATUS_OPEN
    await c.call(
        "AnswerInboxAsk", ib.AnswerInboxAskRequest(item_id=iid, answers=GOOD, client_key="k1"), h
    )
    back = await c.call("TakeBackInboxAnswer", ib.TakeBackInboxAnswerRequest(item_id=iid), h)
    assert back.item.status == pb.INBOX_ITEM_STATUS_OPEN and back.item.revision == 1
    await expect(
        "already_exists",
        c.call("TakeBackInboxAnswer", ib.TakeBackInboxAnswerRequest(item_id=iid), h),
    )
    closed = await c.call("CloseInboxItem", ib.CloseInboxItemRequest(item_id=iid), h)
    assert closed.item.status == pb.INBOX_ITEM_STATUS_CLOSED
    assert closed.item.closed_by_account_id == str(w.human.account_id)
    assert closed.item.close_reason == "" and closed.item.revision == 1
    reopened = await c.call("ReopenInboxItem", ib.ReopenInboxItemRequest(item_id=iid), h)
    assert reopened.item.status == pb.INBOX_ITEM_STATUS_OPEN
    replied = await c.call(
        "ReplyInboxItem",
        ib.ReplyInboxItemRequest(item_id=iid, text="one more thing", files=[_file()]),
        h,
    )
    assert replied.message.message.blocks[0].text.text == "one more thing"
    assert replied.message.ask_status == ib.INBOX_ASK_STATUS_UNSPECIFIED
    got = await c.call("GetInboxItem", ib.GetInboxItemRequest(item_id=iid, message_limit=1), h)
    assert [m.message.message_id for m in got.thread][-1] == replied.message.message.message_id
    assert got.total_messages == 2


async def test_who_may_call_and_what_the_errors_say(
    inbox_client: Client, api_world: World, server: Any
) -> None:
    w, c = api_world, inbox_client
    item, _ = await server.inbox.post(w.agent, "k", "t", "", two_question_ask())
    iid = str(item.item_id)
    get = ib.GetInboxItemRequest(item_id=iid)
    # Someone who neither owns nor was granted the agent is told it isn't there.
    hidden = await expect("not_found", c.call("GetInboxItem", get, tok(w, w.other_human)))
    unknown = await expect(
        "not_found",
        c.call(
            "GetInboxItem",
            ib.GetInboxItemRequest(item_id="00000000-0000-0000-0000-000000000000"),
            tok(w, w.human),
        ),
    )
    assert hidden.message.replace(iid, "?") == unknown.message.replace(
        "00000000-0000-0000-0000-000000000000", "?"
    )
    await expect("permission_denied", c.call("GetInboxItem", get, tok(w, w.agent)))
    await expect("unauthenticated", c.call("GetInboxItem", get, None))
    await expect(
        "invalid_argument", c.call("GetInboxItem", ib.GetInboxItemRequest(), tok(w, w.human))
    )
    await expect(
        "not_found",
        c.call("GetInboxItem", ib.GetInboxItemRequest(item_id="nope"), tok(w, w.human)),
    )
    await expect(
        "invalid_argument",
        c.call(
            "AnswerInboxAsk", ib.AnswerInboxAskRequest(item_id=iid, answers=GOOD), tok(w, w.human)
        ),
    )
    await expect(
        "invalid_argument",
        c.call(
            "ReplyInboxItem",
            ib.ReplyInboxItemRequest(
                item_id=iid, files=[ib.InboxFile(name="x.png", data=b"<svg/>")]
            ),
            tok(w, w.human),
        ),
    )
    await expect(
        "invalid_argument",
        c.call("ListInboxItems", ib.ListInboxItemsRequest(page_token="%%"), tok(w, w.human)),
    )
    await expect(
        "invalid_argument",
        c.call("ListInboxItems", ib.ListInboxItemsRequest(statuses=[99]), tok(w, w.human)),
    )


async def test_list_pages_and_filters(api_world: World, server: Any) -> None:
    w = api_world
    c = InboxGrpc(server.grpc_port)
    try:
        for key in ("a", "b", "c"):
            await server.inbox.post(w.agent, key, key, "", yes_no())
        await server.inbox.post(w.agent, "note", "n", "fyi")
        h = tok(w, w.human)
        first = await c.call("ListInboxItems", ib.ListInboxItemsRequest(page_size=3), h)
        assert [i.key for i in first.items] == ["note", "c", "b"] and first.next_page_token
        rest = await c.call(
            "ListInboxItems",
            ib.ListInboxItemsRequest(page_size=3, page_token=first.next_page_token),
            h,
        )
        assert [i.key for i in rest.items] == ["a"] and not rest.next_page_token
        notes = await c.call(
            "ListInboxItems", ib.ListInboxItemsRequest(statuses=[pb.INBOX_ITEM_STATUS_NOTE]), h
        )
        assert [i.key for i in notes.items] == ["note"]
        other = await w.add_account("scout2", kind=w.agent.kind)
        mine = await c.call(
            "ListInboxItems", ib.ListInboxItemsRequest(agent_account_id=str(other.account_id)), h
        )
        assert list(mine.items) == []
    finally:
        await c.close()


# --- events ----------------------------------------------------------------------


async def test_a_take_back_or_reopen_past_the_open_bound_is_resource_exhausted(
    inbox_client: Client, api_world: World, server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    w, c, inbox = api_world, inbox_client, server.inbox
    monkeypatch.setattr(inbox, "max_open_per_agent", 1)
    h = tok(w, w.human)
    answered, _ = await inbox.post(w.agent, "a", "t", "", yes_no())
    await inbox.answer(w.human, answered.item_id, [Answer("go", ("y",))], "c")
    closed, _ = await inbox.post(w.agent, "b", "t", "", yes_no())
    await inbox.close(w.human, closed.item_id)
    await inbox.post(w.agent, "c", "t", "", yes_no())
    refused = await expect(
        "resource_exhausted",
        c.call(
            "TakeBackInboxAnswer", ib.TakeBackInboxAnswerRequest(item_id=str(answered.item_id)), h
        ),
    )
    assert "limit is 1" in refused.message
    await expect(
        "resource_exhausted",
        c.call("ReopenInboxItem", ib.ReopenInboxItemRequest(item_id=str(closed.item_id)), h),
    )
    assert (await inbox.read_thread(w.human, answered.item_id)).item.status.value == "answered"
    assert (await inbox.read_thread(w.human, closed.item_id)).item.status.value == "closed"


async def _next(stream: AsyncIterator[Any]) -> Any:
    return await asyncio.wait_for(anext(stream), 10)


async def test_subscribe_carries_inbox_changes_to_their_audience_only(
    api_world: World, server: Any
) -> None:
    w = api_world
    comms = GrpcClient(server.grpc_port)
    try:
        owner = comms.stream("Subscribe", pb.SubscribeRequest(), tok(w, w.human))
        outsider = comms.stream("Subscribe", pb.SubscribeRequest(), tok(w, w.other_human))
        assert (await _next(owner)).WhichOneof("kind") == "ready"
        assert (await _next(outsider)).WhichOneof("kind") == "ready"
        # Each step read before the next: a stream that is behind gets only
        # an agent's latest presence.
        item, posted = await server.inbox.post(w.agent, "k", "t", "", yes_no())
        post, waiting = [await _next(owner) for _ in range(2)]
        await server.inbox.answer(w.human, item.item_id, [Answer("go", ("y",))], "c")
        answer, settled = [await _next(owner) for _ in range(2)]
        await w.post_text(w.human, "marker")  # grace is not in #general either
        await server.inbox.grant(w.human, w.agent.account_id, w.other_human.account_id)
        await server.inbox.reply(w.human, item.item_id, "for grace too")
        marker, reply = [await _next(owner) for _ in range(2)]
        # An open inbox ask makes its agent WAITING; the answer settles it.
        assert waiting.presence_changed.presence.state == pb.PRESENCE_STATE_WAITING
        assert settled.presence_changed.presence.state == pb.PRESENCE_STATE_OFFLINE
        changed = post.inbox_item_changed
        assert changed.item_id == str(item.item_id) and changed.key == "k"
        assert changed.status == pb.INBOX_ITEM_STATUS_OPEN and changed.revision == 1
        assert changed.actor_account_id == str(w.agent.account_id)
        assert changed.message.message_id == str(posted.message_id)
        assert changed.message.blocks[0].ask.ask_id == item.ask_id
        assert answer.inbox_item_changed.status == pb.INBOX_ITEM_STATUS_ANSWERED
        assert answer.inbox_item_changed.message.blocks[0].ask_answer.ask_id == item.ask_id
        assert marker.WhichOneof("kind") == "message_posted"
        assert reply.inbox_item_changed.message.blocks[0].text.text == "for grace too"
        # Grace hears the inbox only once she is granted it, and scout's
        # presence neither before (they share no channel) nor for the reply.
        heard = await _next(outsider)
        assert heard.event_id == reply.event_id
        await owner.aclose()  # type: ignore[attr-defined]
        await outsider.aclose()  # type: ignore[attr-defined]
    finally:
        await comms.close()


def _png(name: str) -> Picture:
    return Picture(f"{name}.png", PNG)


def _file() -> ib.InboxFile:
    return ib.InboxFile(name="p.png", data=PNG)
