"""A NUL (or another control character where it makes no sense) in any string
of any request, on every surface, is INVALID_ARGUMENT naming the field;
never INTERNAL, never written."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compass.v1 import admin_pb2 as ad
from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass.v1 import inbox_pb2 as ib
from compass.v1 import preferences_pb2 as pf
from compass_server.api.text import FREE_TEXT
from tests.relay_client import relay, runner_for
from tests.world import World

SERVICES = [
    (pb.DESCRIPTOR.services_by_name["CommsService"], pb),
    (ib.DESCRIPTOR.services_by_name["InboxService"], ib),
    (ad.DESCRIPTOR.services_by_name["AdminService"], ad),
    (ad.DESCRIPTOR.services_by_name["IdentityService"], ad),
    (pf.DESCRIPTOR.services_by_name["PreferencesService"], pf),
]


def _string_paths(d: Descriptor, where: str, depth: int = 0) -> Iterator[tuple[str, list[Any]]]:
    """Each string field reachable from `d` (the first element of a repeated
    field): its path as the server names it, and the steps to set it."""
    for f in d.fields:
        path = f"{where}.{f.name}" if where else f.name
        step = f"{path}[0]" if f.is_repeated else path
        if f.type == FieldDescriptor.TYPE_MESSAGE:
            if depth < 5 and not f.message_type.full_name.startswith("google.protobuf."):
                for sub, steps in _string_paths(f.message_type, step, depth + 1):
                    yield sub, [f, *steps]
        elif f.type == FieldDescriptor.TYPE_STRING:
            yield step, [f]


def _with(cls: type[Message], steps: list[Any], value: str) -> Message:
    msg = cls()
    node: Any = msg
    for f in steps[:-1]:
        node = getattr(node, f.name).add() if f.is_repeated else getattr(node, f.name)
    last = steps[-1]
    if last.is_repeated:
        getattr(node, last.name).append(value)
    else:
        setattr(node, last.name, value)
    return msg


def bad_requests(cls: type[Message], value: str) -> Iterator[tuple[str, Message]]:
    for path, steps in _string_paths(cls.DESCRIPTOR, ""):
        yield path, _with(cls, steps, value)


CASES = [
    (service.full_name, m.name, module, path, request)
    for service, module in SERVICES
    for m in service.methods
    if not m.server_streaming
    for path, request in bad_requests(getattr(module, m.input_type.name), "a\x00b")
]


async def _call(
    server: Any, transport: str, service: str, method: str, request: Message, token: str
) -> tuple[str, str]:
    """The call's status token and message ("ok" on success)."""
    if transport == "grpc":
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            rpc = channel.unary_unary(f"/{service}/{method}")
            try:
                await rpc(
                    request.SerializeToString(),
                    metadata=[("authorization", f"Bearer {token}")],
                    timeout=10,
                )
            except grpc.aio.AioRpcError as exc:
                return exc.code().name.lower(), exc.details() or ""
            return "ok", ""
    if transport == "json":
        body, kind = json_format.MessageToJson(request).encode(), "application/json"
    else:
        body, kind = request.SerializeToString(), "application/proto"
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.http_port}") as http:
        res = await http.post(
            f"/{service}/{method}",
            content=body,
            headers={"content-type": kind, "authorization": f"Bearer {token}"},
        )
    if res.status_code == 200:
        return "ok", ""
    err = res.json()
    return err["code"], err.get("message", "")


@pytest.mark.parametrize("transport", ["grpc", "json", "proto"])
async def test_a_nul_in_any_string_of_any_request_names_the_field(
    server: Any, api_world: World, transport: str
) -> None:
    w = api_world
    token = w.tokens[w.human.account_id]
    before = await w.store.last_event_id(w.human)
    assert len(CASES) > 40
    wrong = []
    for service, method, _, path, request in CASES:
        code, message = await _call(server, transport, service, method, request, token)
        if code != "invalid_argument" or path not in message or "U+0000" not in message:
            wrong.append((method, path, code, message))
    assert not wrong, wrong
    assert await w.store.last_event_id(w.human) == before


@pytest.mark.parametrize(
    ("field", "value", "refused"),
    [
        ("text", "two\nlines\tand a tab\r\n", False),
        ("text", "a bell \x07", True),
        ("text", "an escape \x1b[31m red", True),
        ("text", "DEL \x7f", True),
        ("text", "a C1 control \x85", True),
        ("channel_id", "\n", True),
    ],
)
async def test_free_text_takes_line_breaks_and_ids_take_no_control_character(
    client: Any, api_world: World, field: str, value: str, refused: bool
) -> None:
    from tests.servers import CallError

    w = api_world
    request = pb.PostMessageRequest(
        channel_id=str(w.channel.channel_id), blocks=[pb.MessageBlock(text=pb.TextBlock(text="x"))]
    )
    if field == "text":
        request.blocks[0].text.text = value
    else:
        request.channel_id = value
    token = w.tokens[w.human.account_id]
    if not refused:
        res = await client.call("PostMessage", request, token)
        assert res.message.blocks[0].text.text == value
        return
    with pytest.raises(CallError) as info:
        await client.call("PostMessage", request, token)
    assert info.value.code == "invalid_argument"
    path = "blocks[0].text.text" if field == "text" else field
    assert path in info.value.message, info.value.message


ARMS = [
    f.name
    for f in gw.CommsCallRequest.DESCRIPTOR.oneofs_by_name["call"].fields
    if f.message_type is not None
]


async def test_a_nul_in_any_string_of_any_relay_call_is_refused_in_band(
    server: Any, api_world: World
) -> None:
    w = api_world
    token = await runner_for(w)
    wrong = []
    async with relay(server.grpc_port, token) as r:
        await r.bound("s1", w.agent)
        before = await w.store.last_event_id(w.human)
        for arm in ARMS:
            cls = gw.CommsCallRequest.DESCRIPTOR.fields_by_name[arm].message_type
            for path, request in bad_requests(_message_class(cls), "a\x00b"):
                result = await r.call("s1", arm, request)
                want = f"call.{arm}.{path}"
                if (
                    result.WhichOneof("result") != "error"
                    or result.error.code != "invalid_argument"
                    or want not in result.error.message
                ):
                    wrong.append((want, result))
        traced = gw.CommsCallRequest(
            trigger_traceparent="00-\x00", list_channels=pb.ListChannelsRequest()
        )
        result = await r.start_call("s1", traced)
        assert result.error.code == "invalid_argument"
        assert "call.trigger_traceparent" in result.error.message
        # A bind's session id is a name the runner chooses: no control characters.
        frame = await r.bind("s\x00", w.agent)
        assert frame.WhichOneof("frame") == "session_error", frame
        assert frame.session_error.error.code == "invalid_argument"
        assert "bind.session_id" in frame.session_error.error.message
        # The stream still serves.
        await r.ok("s1", "list_channels", pb.ListChannelsRequest())
        assert await w.store.last_event_id(w.human) == before
    assert not wrong, wrong


def _message_class(d: Descriptor) -> type[Message]:
    from google.protobuf import symbol_database

    return symbol_database.Default().GetSymbol(d.full_name)  # type: ignore[no-any-return]


CONTROL = "".join(map(chr, [*range(0x20), 0x7F, *range(0x80, 0xA0)]))


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    case=st.sampled_from(CASES),
    value=st.text(alphabet=st.sampled_from(CONTROL + "ab é"), min_size=1, max_size=6),
)
async def test_hypothesis_control_characters_anywhere_never_internal(
    server: Any, api_world: World, case: Any, value: str
) -> None:
    """Any mix of control characters in any string field: refused naming the
    field when the field's rule refuses one of them, and never INTERNAL."""
    service, method, module, path, _ = case
    cls = getattr(
        module,
        module.DESCRIPTOR.services_by_name[service.rsplit(".", 1)[1]]
        .methods_by_name[method]
        .input_type.name,
    )
    steps = dict(_string_paths(cls.DESCRIPTOR, ""))[path]
    request = _with(cls, steps, value)
    w = api_world
    code, message = await _call(
        server, "json", service, method, request, w.tokens[w.human.account_id]
    )
    assert code != "internal", (method, path, value, message)
    free_text = steps[-1].name in FREE_TEXT
    refused = any(c in CONTROL and not (free_text and c in "\t\n\r") for c in value)
    if refused:
        assert (code, path in message) == ("invalid_argument", True), (path, value, message)
    else:
        assert path not in message or "control character" not in message, message
