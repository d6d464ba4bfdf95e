"""Connect's framing, headers and JSON as a careless or hostile client sends
them: every answer is a documented code with a fixed readable message, never
Python's exception text, the protobuf runtime's internals, or `unknown` /
`internal` for the client's own mistake."""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import struct
import urllib.parse
import uuid
from typing import Any

import httpx
import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compass.v1 import comms_pb2 as pb
from tests.world import World

# What a client's mistake may get; `internal` and `unknown` are the server's.
CLIENT_CODES = {
    "invalid_argument",
    "not_found",
    "resource_exhausted",
    "already_exists",
    "permission_denied",
    "unauthenticated",
    "unimplemented",
    "failed_precondition",
    # The client's own deadline (connect-timeout-ms, even 0) ran out.
    "deadline_exceeded",
}
# Text that belongs to Python or the protobuf runtime, never to a message.
LEAKS = re.compile(
    r"Traceback|codec can't|Error\(|exception set|upb|google\.protobuf|\bline \d+|"
    r"object has no attribute|unexpected keyword|NoneType|psycopg|"
    r"protocol error|'utf-8'|surrogate"
)
UNARY = "/compass.v1.CommsService/ListChannels"
STREAM = "/compass.v1.CommsService/Subscribe"


def _checked(status: int, body: dict[str, Any], what: object) -> None:
    assert body.get("code") in CLIENT_CODES, (status, body, what)
    message = body.get("message", "")
    assert isinstance(message, str) and message, (status, body, what)
    assert not LEAKS.search(message), (status, body, what)


def _end_of_stream(content: bytes) -> dict[str, Any]:
    """The error of a Connect streaming answer's end-of-stream envelope
    (gzipped when the client accepted gzip: its flags say so)."""
    at = 0
    while at + 5 <= len(content):
        flags, size = content[at], struct.unpack(">I", content[at + 1 : at + 5])[0]
        data = content[at + 5 : at + 5 + size]
        at += 5 + size
        if flags & 0b10:
            if flags & 0b01:
                data = gzip.decompress(data)
            end: dict[str, Any] = json.loads(data)
            return end.get("error", {})  # type: ignore[no-any-return]
    raise AssertionError(f"no end-of-stream envelope in {content[:200]!r}")


def _grpc_status(res: httpx.Response) -> tuple[str, str] | None:
    """gRPC-Web's status and message: in the headers (trailers-only), else
    in the body's trailer frame."""
    if "grpc-status" in res.headers:
        return res.headers["grpc-status"], res.headers.get("grpc-message", "")
    content, at = res.content, 0
    while at + 5 <= len(content):
        flags, size = content[at], struct.unpack(">I", content[at + 1 : at + 5])[0]
        data = content[at + 5 : at + 5 + size]
        at += 5 + size
        if flags & 0x80:
            fields = dict(line.split(":", 1) for line in data.decode().split("\r\n") if ":" in line)
            return fields.get("grpc-status", "").strip(), fields.get("grpc-message", "").strip()
    return None


def checked_answer(res: httpx.Response, what: object) -> None:
    if res.headers.get("content-type", "").startswith("application/grpc"):
        status = _grpc_status(res)
        if status is not None and status[0] != "0":
            code, message = status[0], urllib.parse.unquote(status[1])
            # 2 is UNKNOWN, 13 INTERNAL.
            assert code not in ("2", "13"), (code, message, what)
            assert message and not LEAKS.search(message), (code, message, what)
        return
    if res.headers.get("content-type", "").startswith("application/connect+"):
        if res.status_code == 200:
            error = _end_of_stream(res.content)
            if error:
                _checked(res.status_code, error, what)
            return
    if res.status_code == 200:
        return
    _checked(res.status_code, res.json(), what)


def envelope(flags: int, data: bytes) -> bytes:
    return bytes([flags]) + struct.pack(">I", len(data)) + data


@pytest.fixture
async def http(server: Any) -> Any:
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{server.http_port}", timeout=10
    ) as client:
        yield client


def bearer(w: World) -> str:
    return f"Bearer {w.tokens[w.human.account_id]}"


@pytest.mark.parametrize("where", ["authorization", "x-anything", "connect-protocol-version"])
async def test_a_header_that_is_not_utf8_is_invalid_argument(
    http: httpx.AsyncClient, api_world: World, where: str
) -> None:
    headers = {"content-type": "application/json", "authorization": bearer(api_world)}
    headers[where] = "Bearer \udcff".encode("utf-8", "surrogateescape")  # type: ignore[assignment]
    res = await http.post(UNARY, content=b"{}", headers=headers)
    assert res.status_code == 400, res.text
    assert res.json() == {
        "code": "invalid_argument",
        "message": "a request header is not valid UTF-8",
    }


async def test_a_lone_surrogate_as_a_json_key_is_invalid_argument(
    http: httpx.AsyncClient, api_world: World
) -> None:
    for body in (b'{"\\udc80": 1}', b'{"pageToken": "\\ud800"}', b'{"x": {"\\udfff": []}}'):
        res = await http.post(
            UNARY,
            content=body,
            headers={"content-type": "application/json", "authorization": bearer(api_world)},
        )
        assert res.status_code == 400, (body, res.text)
        assert res.json() == {
            "code": "invalid_argument",
            "message": "the request body is not a valid compass.v1.ListChannelsRequest in JSON",
        }


async def test_a_compressed_envelope_without_compression_is_invalid_argument(
    http: httpx.AsyncClient, api_world: World
) -> None:
    res = await http.post(
        STREAM,
        content=envelope(0b01, b"{}"),
        headers={
            "content-type": "application/connect+json",
            "authorization": bearer(api_world),
        },
    )
    assert res.status_code == 200, res.text
    assert _end_of_stream(res.content) == {
        "code": "invalid_argument",
        "message": "a message of the request stream is flagged compressed, "
        "but the request names no compression (connect-content-encoding)",
    }


async def test_broken_stream_framing_is_invalid_argument(
    http: httpx.AsyncClient, api_world: World
) -> None:
    for body in (envelope(0b100, b"{}"), envelope(0, b"{}")[:6], b"\x00\x00"):
        res = await http.post(
            STREAM,
            content=body,
            headers={
                "content-type": "application/connect+json",
                "authorization": bearer(api_world),
            },
        )
        error = _end_of_stream(res.content)
        assert error.get("code") == "invalid_argument", (body, res.content)
        _checked(res.status_code, error, body)


async def test_grpc_over_http1_is_told_what_to_use(
    http: httpx.AsyncClient, api_world: World
) -> None:
    res = await http.post(
        UNARY,
        content=envelope(0, b""),
        headers={"content-type": "application/grpc", "authorization": bearer(api_world)},
    )
    assert res.headers["grpc-status"] == "12"  # UNIMPLEMENTED
    assert urllib.parse.unquote(res.headers["grpc-message"]) == (
        "gRPC needs HTTP/2 (its status travels in trailers); this request came over "
        "HTTP/1.1: use h2c, or Connect or gRPC-Web over HTTP/1.1"
    )


# --- the fuzzer ---------------------------------------------------------------------

PATHS = [
    UNARY,
    "/compass.v1.CommsService/PostMessage",
    "/compass.v1.CommsService/SearchMessages",
    "/compass.v1.InboxService/ListInboxItems",
    STREAM,
]
CONTENT_TYPES = [
    "application/json",
    "application/proto",
    "application/connect+json",
    "application/connect+proto",
    "application/json; charset=utf-8",
    "application/x-www-form-urlencoded",
    "application/grpc-web+proto",
    "application/grpc-web+json",
    "application/grpc",
]
header_bytes = st.binary(max_size=12) | st.sampled_from(
    [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"gzip", b"identity", b"br", b"1", b"-5", b"9" * 30]
)
header_names = st.sampled_from(
    [
        b"authorization",
        b"connect-protocol-version",
        b"connect-timeout-ms",
        b"content-encoding",
        b"connect-content-encoding",
        b"accept-encoding",
        b"connect-accept-encoding",
        b"x-compass-surface",
        b"traceparent",
        b"x-anything",
    ]
)
json_keys = st.text(max_size=4) | st.sampled_from(
    ["\udc80", "\ud800", "pageSize", "pageToken", "channelId", "blocks", "query", "@type"]
)


def _nested(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(json_keys, inner, max_size=3)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    _nested,
    max_leaves=8,
)
# Messages of the contract with fields a careless client fills: any text
# (control characters included), ids that are not ids, odd numbers.
any_text = st.text(max_size=12) | st.text(
    alphabet=st.sampled_from("\x00\x01\x1b\x7f\x85\u2028\ufeff\n\tab😀"), max_size=8
)
messages = st.one_of(
    st.builds(
        lambda channel, text: pb.PostMessageRequest(
            channel_id=channel, blocks=[pb.MessageBlock(text=pb.TextBlock(text=text))]
        ),
        any_text,
        any_text,
    ),
    st.builds(
        lambda q, question, label: pb.PostMessageRequest(
            channel_id=str(uuid.uuid4()),
            blocks=[
                pb.MessageBlock(
                    ask=pb.Ask(
                        questions=[
                            pb.AskQuestion(
                                question_id=q,
                                question=question,
                                options=[pb.AskOption(id=q, label=label)],
                            )
                        ]
                    )
                )
            ],
        ),
        any_text,
        any_text,
        any_text,
    ),
    st.builds(
        lambda query, channel, size, token: pb.SearchMessagesRequest(
            query=query, channel_id=channel, page_size=size, page_token=token
        ),
        any_text,
        any_text,
        st.integers(-(2**31), 2**31 - 1),
        any_text,
    ),
    st.builds(
        lambda size, token: pb.ListChannelsRequest(page_size=size, page_token=token),
        st.integers(-(2**31), 2**31 - 1),
        any_text,
    ),
)


def _encoded(message: Any, form: str, flags: int | None) -> bytes:
    data = (
        message.SerializeToString()
        if form == "binary"
        else json_format.MessageToJson(message).encode()
    )
    return data if flags is None else envelope(flags, data)


bodies = (
    st.builds(
        _encoded,
        messages,
        st.sampled_from(["binary", "json"]),
        st.none() | st.sampled_from([0, 1, 2]),
    )
    | st.binary(max_size=40)
    | json_values.map(lambda v: json.dumps(v).encode())
    | st.tuples(st.integers(0, 255), json_values).map(
        lambda t: envelope(t[0], json.dumps(t[1]).encode())
    )
    | st.tuples(st.integers(0, 255), st.integers(0, 2**32 - 1), st.binary(max_size=16)).map(
        lambda t: bytes([t[0]]) + struct.pack(">I", t[1]) + t[2]
    )
)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    path=st.sampled_from(PATHS),
    content_type=st.sampled_from(CONTENT_TYPES),
    extra=st.lists(st.tuples(header_names, header_bytes), max_size=3),
    body=bodies,
)
async def test_fuzzed_connect_requests_get_documented_answers(
    http: httpx.AsyncClient,
    api_world: World,
    path: str,
    content_type: str,
    extra: list[tuple[bytes, bytes]],
    body: bytes,
) -> None:
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", content_type.encode()),
        (b"authorization", bearer(api_world).encode()),
    ]
    headers += [(k, v) for k, v in extra if b"\r" not in v and b"\n" not in v and b"\0" not in v]
    try:
        res = await post(http, path, body, headers)
    except httpx.LocalProtocolError:
        return  # a request the client library itself won't send
    if res is not None:
        checked_answer(res, (path, content_type, extra, body))


async def post(
    http: httpx.AsyncClient, path: str, body: bytes, headers: list[tuple[bytes, bytes]]
) -> httpx.Response | None:
    """The whole answer; None for a Subscribe that was taken and streams on
    (the fuzzer only needs to know it was taken)."""
    async with http.stream("POST", path, content=body, headers=headers) as res:
        try:
            async with asyncio.timeout(1.0):
                await res.aread()
        except TimeoutError:
            assert path == STREAM and res.status_code == 200
            return None
    return res
