"""Bad input at volume: malformed bytes, garbage JSON, oversized messages and
asks. Never INTERNAL, never a crash, nothing written."""

from __future__ import annotations

import json
import random
from typing import Any

import grpc
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compass.v1 import comms_pb2 as pb
from compass_server.store import blocks as limits
from compass_server.transport.grpc_server import MAX_MESSAGE_BYTES
from tests.world import World

METHODS = [
    m.name for m in pb.DESCRIPTOR.services_by_name["CommsService"].methods if not m.server_streaming
]
REFUSALS = {
    "invalid_argument",
    "not_found",
    "resource_exhausted",
    "already_exists",
    "permission_denied",
    "unimplemented",
}


async def event_count(w: World) -> int:
    return await w.store.last_event_id(w.human)


async def test_malformed_protobuf_bytes_over_grpc(server: Any, api_world: World) -> None:
    w = api_world
    before = await event_count(w)
    rng = random.Random(7)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        for i in range(300):
            method = METHODS[i % len(METHODS)]
            rpc = channel.unary_unary(f"/compass.v1.CommsService/{method}")
            payload = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
            try:
                await rpc(
                    payload,
                    metadata=[("authorization", f"Bearer {w.tokens[w.human.account_id]}")],
                    timeout=10,
                )
            except grpc.aio.AioRpcError as exc:
                assert exc.code() not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), (
                    method,
                    payload,
                    exc.details(),
                )
        # Still serving.
        ok = channel.unary_unary(
            "/compass.v1.CommsService/ListChannels",
            request_serializer=pb.ListChannelsRequest.SerializeToString,
            response_deserializer=pb.ListChannelsResponse.FromString,
        )
        res = await ok(
            pb.ListChannelsRequest(),
            metadata=[("authorization", f"Bearer {w.tokens[w.human.account_id]}")],
        )
        assert len(res.channels) == 1
    assert await event_count(w) == before


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/json", b"{"),
        ("application/json", b"[1,2,3]"),
        ("application/json", b'{"channelId": 5}'),
        ("application/json", b'{"blocks": "nope"}'),
        ("application/json", b'{"unknownField": true}'),
        ("application/json", b"\xff\xfe\x00"),
        ("application/proto", b"\xff\xff\xff\xff\x0f"),
        ("application/proto", b"\x0a\x05ab"),
        ("text/plain", b"hello"),
    ],
)
async def test_garbage_connect_bodies_are_refused(
    server: Any, api_world: World, content_type: str, body: bytes
) -> None:
    w = api_world
    before = await event_count(w)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.http_port}") as http:
        res = await http.post(
            "/compass.v1.CommsService/PostMessage",
            content=body,
            headers={
                "content-type": content_type,
                "authorization": f"Bearer {w.tokens[w.human.account_id]}",
            },
        )
    assert 400 <= res.status_code < 500, (res.status_code, res.text)
    assert "Traceback" not in res.text
    assert await event_count(w) == before


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.text(max_size=20)
        # NUL and other control characters, alone and inside text.
        | st.text(alphabet=st.sampled_from("\x00\x01\x07\x1b\x7f\x85\n\tab"), max_size=8),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "channelId",
                        "blocks",
                        "text",
                        "ask",
                        "questions",
                        "questionId",
                        "options",
                        "id",
                        "recommended",
                        "allowMultiple",
                        "askId",
                        "answers",
                        "chosenOptionIds",
                        "pageSize",
                        "pageToken",
                        "query",
                        "itemId",
                        "clientKey",
                        "statuses",
                        "x",
                    ]
                ),
                inner,
                max_size=5,
            )
        ),
        max_leaves=20,
    )
)
async def test_hypothesis_json_never_internal(server: Any, api_world: World, body: Any) -> None:
    w = api_world
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.http_port}") as http:
        for method in (
            "CommsService/PostMessage",
            "CommsService/RespondToAsk",
            "CommsService/ListMessages",
            "CommsService/SearchMessages",
            "InboxService/ListInboxItems",
            "InboxService/AnswerInboxAsk",
            "InboxService/ReplyInboxItem",
        ):
            res = await http.post(
                f"/compass.v1.{method}",
                content=json.dumps(body),
                headers={
                    "content-type": "application/json",
                    "authorization": f"Bearer {w.tokens[w.human.account_id]}",
                },
            )
            if res.status_code != 200:
                assert res.json()["code"] in REFUSALS, (method, body, res.text)


def big_ask(**over: Any) -> pb.Ask:
    q = pb.AskQuestion(question_id="q", question="?", options=[pb.AskOption(id="a", label="a")])
    ask = pb.Ask(questions=[q])
    for k, v in over.items():
        if k == "questions":
            del ask.questions[:]
            ask.questions.extend(
                pb.AskQuestion(question_id=f"q{i}", question="?") for i in range(v)
            )
        elif k == "options":
            del ask.questions[0].options[:]
            ask.questions[0].options.extend(pb.AskOption(id=f"o{i}", label="x") for i in range(v))
        else:
            setattr(ask.questions[0], k, v)
    return ask


@pytest.mark.parametrize(
    ("block", "code"),
    [
        (
            pb.MessageBlock(text=pb.TextBlock(text="x" * (limits.MAX_TEXT_CHARS + 1))),
            "invalid_argument",
        ),
        (pb.MessageBlock(ask=big_ask(questions=limits.MAX_QUESTIONS + 1)), "invalid_argument"),
        (pb.MessageBlock(ask=big_ask(options=limits.MAX_OPTIONS + 1)), "invalid_argument"),
        (
            pb.MessageBlock(ask=big_ask(question="x" * (limits.MAX_QUESTION_CHARS + 1))),
            "invalid_argument",
        ),
        (
            pb.MessageBlock(ask=big_ask(question_id="q" * (limits.MAX_ID_CHARS + 1))),
            "invalid_argument",
        ),
        (pb.MessageBlock(), "invalid_argument"),
    ],
)
async def test_oversized_messages_and_asks(
    client: Any, api_world: World, block: pb.MessageBlock, code: str
) -> None:
    from tests.servers import CallError

    w = api_world
    before = await event_count(w)
    with pytest.raises(CallError) as info:
        await client.call(
            "PostMessage",
            pb.PostMessageRequest(channel_id=str(w.channel.channel_id), blocks=[block]),
            w.tokens[w.human.account_id],
        )
    assert info.value.code == code
    assert await event_count(w) == before


async def test_too_many_blocks_and_too_large_a_request(client: Any, api_world: World) -> None:
    from tests.servers import CallError

    w = api_world
    many = [pb.MessageBlock(text=pb.TextBlock(text="x"))] * (limits.MAX_BLOCKS + 1)
    with pytest.raises(CallError) as info:
        await client.call(
            "PostMessage",
            pb.PostMessageRequest(channel_id=str(w.channel.channel_id), blocks=many),
            w.tokens[w.human.account_id],
        )
    assert info.value.code == "invalid_argument"
    # Past the transport's request limit.
    huge = [pb.MessageBlock(text=pb.TextBlock(text="x" * (MAX_MESSAGE_BYTES + 1)))]
    with pytest.raises(CallError) as info:
        await client.call(
            "PostMessage",
            pb.PostMessageRequest(channel_id=str(w.channel.channel_id), blocks=huge),
            w.tokens[w.human.account_id],
        )
    assert info.value.code == "resource_exhausted"


@pytest.mark.parametrize(
    ("method", "request_"),
    [
        ("RespondToAsk", pb.RespondToAskRequest(ask_id="a" * 100_000)),
        ("ListMessages", pb.ListMessagesRequest(channel_id="c" * 100_000)),
        ("GetMessage", pb.GetMessageRequest(message_id="m" * 100_000)),
    ],
)
async def test_echoed_input_is_truncated(
    client: Any, api_world: World, method: str, request_: Any
) -> None:
    """A 100 KB id is NOT_FOUND like any unknown one; the message quotes its
    start, not all of it (which would overflow gRPC's metadata)."""
    from tests.servers import CallError

    w = api_world
    with pytest.raises(CallError) as info:
        await client.call(method, request_, w.tokens[w.human.account_id])
    assert info.value.code == "not_found", info.value
    assert len(info.value.message) < 300, len(info.value.message)
    assert "100000 characters" in info.value.message


async def test_an_unknown_enum_name_in_connect_json_is_refused(
    server: Any, api_world: World
) -> None:
    w = api_world
    headers = {
        "content-type": "application/json",
        "authorization": f"Bearer {w.tokens[w.human.account_id]}",
    }
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.http_port}") as http:
        url = "/compass.v1.InboxService/ListInboxItems"
        res = await http.post(url, content=b'{"statuses": ["NOPE"]}', headers=headers)
        assert res.status_code == 400, res.text
        assert res.json()["code"] == "invalid_argument"
        assert "statuses[0]" in res.json()["message"]
        assert "INBOX_ITEM_STATUS_OPEN" in res.json()["message"]  # what it takes
        # A known name works; an unknown field is still ignored.
        ok = await http.post(
            url, content=b'{"statuses": ["INBOX_ITEM_STATUS_OPEN"], "later": 1}', headers=headers
        )
        assert ok.status_code == 200, ok.text


@pytest.mark.parametrize(
    ("content_type", "body", "encoding"),
    [
        ("application/json", b"[" * 50_000 + b"]" * 50_000, None),
        ("application/json", b'{"channelId": "\xff\xfe"}', None),
        ("application/json", b'{"channelId": "a", "channelId": "b"}', None),
        ("application/json", b'{"blocks": [{"text": {"text": 5}}]}', None),
        ("application/proto", b"\x0a\x02\xff\xfe", None),
        ("application/proto", b"\x08\x01", "gzip"),
        ("application/json", b"{}", "gzip"),
    ],
)
async def test_connect_decode_errors_have_a_fixed_readable_message(
    server: Any, api_world: World, content_type: str, body: bytes, encoding: str | None
) -> None:
    w = api_world
    headers = {
        "content-type": content_type,
        "authorization": f"Bearer {w.tokens[w.human.account_id]}",
    }
    if encoding:
        headers["content-encoding"] = encoding
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.http_port}") as http:
        res = await http.post("/compass.v1.CommsService/PostMessage", content=body, headers=headers)
    assert res.status_code == 400, res.text
    error = res.json()
    assert error["code"] == "invalid_argument"
    message = error["message"]
    assert "compass.v1.PostMessageRequest" in message or "gzip" in message, message
    for leak in ("recursion", "codec", "utf-8", "Error", "Failed", "decompress", "line 1"):
        assert leak not in message, message


async def test_a_message_is_measured_in_encoded_bytes(client: Any, api_world: World) -> None:
    """248k emoji are ~1 MB as stored: over the limit, though far fewer
    characters than the limit's bytes."""
    from tests.servers import CallError

    w = api_world
    token = w.tokens[w.human.account_id]
    emoji = [pb.MessageBlock(text=pb.TextBlock(text="😀" * 31_000)) for _ in range(8)]
    with pytest.raises(CallError) as info:
        await client.call(
            "PostMessage",
            pb.PostMessageRequest(channel_id=str(w.channel.channel_id), blocks=emoji),
            token,
        )
    assert info.value.code == "resource_exhausted"
    assert f"the limit is {limits.MAX_MESSAGE_BYTES} bytes" in info.value.message
    # The same number of ASCII characters is well within it.
    ascii_ = [pb.MessageBlock(text=pb.TextBlock(text="x" * 31_000)) for _ in range(8)]
    res = await client.call(
        "PostMessage",
        pb.PostMessageRequest(channel_id=str(w.channel.channel_id), blocks=ascii_),
        token,
    )
    assert len(res.message.blocks) == 8


async def test_an_answer_is_measured_in_encoded_bytes(client: Any, api_world: World) -> None:
    from tests.servers import CallError

    w = api_world
    questions = [pb.AskQuestion(question_id=f"q{i}", question="?") for i in range(10)]
    ask = await client.call(
        "PostMessage",
        pb.PostMessageRequest(
            channel_id=str(w.channel.channel_id),
            blocks=[pb.MessageBlock(ask=pb.Ask(questions=questions))],
        ),
        w.tokens[w.agent.account_id],
    )
    ask_id = ask.message.blocks[0].ask.ask_id
    # 10 × 9,000 emoji: within the characters per answer, ~360 KB in all.
    answers = [
        pb.AskQuestionAnswer(question_id=f"q{i}", custom_text="😀" * 9_000) for i in range(10)
    ]
    with pytest.raises(CallError) as info:
        await client.call(
            "RespondToAsk",
            pb.RespondToAskRequest(ask_id=ask_id, answers=answers),
            w.tokens[w.human.account_id],
        )
    assert info.value.code == "invalid_argument"
    assert f"{limits.MAX_ANSWER_TEXT_BYTES} bytes" in info.value.message
    small = [pb.AskQuestionAnswer(question_id=f"q{i}", custom_text="😀" * 100) for i in range(10)]
    res = await client.call(
        "RespondToAsk",
        pb.RespondToAskRequest(ask_id=ask_id, answers=small),
        w.tokens[w.human.account_id],
    )
    assert res.ask_message.blocks[0].ask.answered
