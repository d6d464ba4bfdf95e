"""Traces: a span per call with its method, status and actor kind, the store's
statements as its children, a caller's W3C trace continued, and an agent's
ask, the person's answer and the delivery back in one trace. Spans are read
from the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json
import logging
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_server.telemetry.logs import JsonFormatter
from tests.conftest import TEST_DEADLINE_MIN_SECONDS, running_server
from tests.relay_client import WAIT, relay, runner_for
from tests.servers import CallError, ConnectClient, GrpcClient
from tests.world import World

# A caller's trace: trace id, then its span id.
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TURN_TRACE = "0af7651916cd43dd8448eb211c80319c"
TURN_SPAN = "b7ad6b7169203331"


def traceparent(trace_id: str, span_id: str) -> str:
    return f"00-{trace_id}-{span_id}-01"


class Traced:
    def __init__(self, server: Any, spans: InMemorySpanExporter) -> None:
        self.server = server
        self.exporter = spans

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]

    async def wait_for(self, name: str, trace_id: str) -> ReadableSpan:
        for _ in range(100):
            for s in self.named(name):
                assert s.context is not None
                if f"{s.context.trace_id:032x}" == trace_id:
                    return s
            await asyncio.sleep(0.05)
        raise AssertionError(f"no span {name} in trace {trace_id}: {self.names()}")

    def names(self) -> list[str]:
        return [s.name for s in self.spans()]


@pytest.fixture(scope="module")
async def traced(
    database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Traced]:
    from compass_server.app import CompassServer, Settings

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    srv = CompassServer(
        Settings(
            database_url=database_url,
            data_dir=pathlib.Path(tmp_path_factory.mktemp("traced")),
            grpc_listen="127.0.0.1:0",
            http_listen="127.0.0.1:0",
            ask_deadline_min_seconds=TEST_DEADLINE_MIN_SECONDS,
        ),
        tracer_provider=provider,
    )
    await srv.start()
    try:
        yield Traced(srv, exporter)
    finally:
        await srv.stop(1.0)
        provider.shutdown()


@pytest.fixture
async def world(traced: Traced) -> World:
    traced.exporter.clear()
    return await World.create(traced.server.store)


def hex_trace(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.trace_id:032x}"


def hex_span(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.span_id:016x}"


def children(t: Traced, parent: ReadableSpan) -> list[ReadableSpan]:
    return [
        s for s in t.spans() if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]


def one_question() -> pb.Ask:
    return pb.Ask(
        questions=[
            pb.AskQuestion(
                question_id="go",
                question="Ship it?",
                options=[pb.AskOption(id="y", label="Yes"), pb.AskOption(id="n", label="No")],
            )
        ]
    )


@pytest.mark.parametrize("transport", ["grpc", "connect"])
async def test_a_call_continues_the_callers_trace_and_its_statements_are_children(
    traced: Traced, world: World, transport: str
) -> None:
    w = world
    client: Any = (
        GrpcClient(traced.server.grpc_port)
        if transport == "grpc"
        else ConnectClient(traced.server.http_port, "proto")
    )
    try:
        await client.call(
            "PostMessage",
            pb.PostMessageRequest(
                channel_id=str(w.channel.channel_id),
                blocks=[pb.MessageBlock(text=pb.TextBlock(text="hello"))],
            ),
            w.tokens[w.human.account_id],
            [("traceparent", traceparent(CALLER_TRACE, CALLER_SPAN))],
        )
    finally:
        await client.close()
    span = await traced.wait_for("CommsService/PostMessage", CALLER_TRACE)
    assert span.parent is not None and f"{span.parent.span_id:016x}" == CALLER_SPAN
    attrs = dict(span.attributes or {})
    assert attrs["rpc.method"] == "PostMessage"
    assert attrs["compass.transport"] == transport
    assert attrs["compass.status"] == "ok" and attrs["rpc.grpc.status_code"] == 0
    assert attrs["compass.actor.kind"] == "human"
    assert attrs["compass.actor.id"] == str(w.human.account_id)
    statements = children(traced, span)
    assert statements, traced.names()
    assert all(s.name.startswith("db ") for s in statements)
    assert all(hex_trace(s) == CALLER_TRACE for s in statements)
    assert any(
        "compass_post_message" in str((s.attributes or {})["db.query.text"]) for s in statements
    )


async def test_a_refused_call_says_its_status_and_a_call_without_a_trace_starts_one(
    traced: Traced, world: World
) -> None:
    w = world
    client = GrpcClient(traced.server.grpc_port)
    try:
        with pytest.raises(CallError):
            await client.call(
                "GetMessage",
                pb.GetMessageRequest(message_id="00000000-0000-4000-8000-000000000000"),
                w.tokens[w.agent.account_id],
            )
        # A malformed traceparent (garbage, 4 KB of it) is no trace at all: a new one starts.
        await client.call(
            "ListChannels",
            pb.ListChannelsRequest(),
            w.tokens[w.agent.account_id],
            [("traceparent", "00-" + "z" * 4000 + "-bad-01")],
        )
    finally:
        await client.close()
    for _ in range(50):
        if traced.named("CommsService/ListChannels"):
            break
        await asyncio.sleep(0.05)
    (refused,) = traced.named("CommsService/GetMessage")
    attrs = dict(refused.attributes or {})
    assert attrs["compass.status"] == "not_found" and attrs["rpc.grpc.status_code"] == 5
    assert attrs["compass.actor.kind"] == "agent"
    (fresh,) = traced.named("CommsService/ListChannels")
    assert fresh.parent is None
    assert hex_trace(fresh) not in (CALLER_TRACE, TURN_TRACE)


async def test_one_trace_holds_the_agents_ask_the_persons_answer_and_the_delivery_back(
    traced: Traced, world: World
) -> None:
    w = world
    grpc = GrpcClient(traced.server.grpc_port)
    try:
        async with relay(traced.server.grpc_port, await runner_for(w)) as r:
            await r.bound("scout", w.agent)
            call = gw.CommsCallRequest(
                post_ask=gw.PostAskRequest(
                    channel_id=str(w.channel.channel_id), ask=one_question()
                ),
                trigger_traceparent=traceparent(TURN_TRACE, TURN_SPAN),
            )
            result = await asyncio.wait_for(r.start_call("scout", call), WAIT)
            ask_id = result.post_ask.ask_id
            assert ask_id

            # The person answers in a trace of their own (their browser's, say).
            await grpc.call(
                "RespondToAsk",
                pb.RespondToAskRequest(
                    ask_id=ask_id,
                    answers=[pb.AskQuestionAnswer(question_id="go", chosen_option_ids=["y"])],
                ),
                w.tokens[w.human.account_id],
                [("traceparent", traceparent(CALLER_TRACE, CALLER_SPAN))],
            )
            # The answer reaches the agent's session.
            answered = False
            while not answered:
                event = await r.delivery("scout")
                await r.ack("scout", event.event_id)
                if event.HasField("message_posted"):
                    answered = any(
                        b.HasField("ask_answer") and b.ask_answer.ask_id == ask_id
                        for b in event.message_posted.message.blocks
                    )
    finally:
        await grpc.close()

    posted = await traced.wait_for("relay/post_ask", TURN_TRACE)
    assert posted.parent is not None and f"{posted.parent.span_id:016x}" == TURN_SPAN
    posted_attrs = dict(posted.attributes or {})
    assert posted_attrs["compass.actor.kind"] == "agent"
    assert posted_attrs["compass.status"] == "ok"
    assert any(s.name.startswith("db ") for s in children(traced, posted))

    # The answer is a span in the agent's turn, under the call that posted
    # the ask, linked with the person's call (which links back).
    ending = await traced.wait_for("ask answered", TURN_TRACE)
    assert ending.parent is not None and ending.parent.span_id == posted.context.span_id
    assert dict(ending.attributes or {})["compass.ask_id"] == ask_id
    answer = await traced.wait_for("CommsService/RespondToAsk", CALLER_TRACE)
    assert dict(answer.attributes or {})["compass.actor.kind"] == "human"
    assert [hex_span(answer)] == [f"{link.context.span_id:016x}" for link in ending.links]
    assert hex_span(ending) in [f"{link.context.span_id:016x}" for link in answer.links]

    # The delivery of the answer back to the agent's session is in the same trace.
    delivered = await traced.wait_for("relay/deliver", TURN_TRACE)
    deliveries = [s for s in traced.named("relay/deliver") if hex_trace(s) == TURN_TRACE]
    (delivered,) = [
        s for s in deliveries if dict(s.attributes or {})["compass.event_id"] == event.event_id
    ]
    assert delivered.parent is not None and delivered.parent.span_id == posted.context.span_id
    assert dict(delivered.attributes or {})["compass.actor.id"] == str(w.agent.account_id)


class Lines(logging.Handler):
    """JSON log lines as written, formatted inside the call that logged them."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JsonFormatter())
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


async def test_a_calls_json_log_line_carries_its_trace_and_span_ids(
    traced: Traced, world: World
) -> None:
    w = world
    lines = Lines()
    access = logging.getLogger("compass_server.access")
    access.addHandler(lines)
    level = access.level
    access.setLevel(logging.INFO)
    client = GrpcClient(traced.server.grpc_port)
    try:
        await client.call(
            "ListChannels",
            pb.ListChannelsRequest(),
            w.tokens[w.human.account_id],
            [("traceparent", traceparent(CALLER_TRACE, CALLER_SPAN))],
        )
    finally:
        await client.close()
        access.removeHandler(lines)
        access.setLevel(level)
    span = await traced.wait_for("CommsService/ListChannels", CALLER_TRACE)
    (line,) = [x for x in lines.lines if x.get("method") == "CommsService/ListChannels"]
    assert (line["trace_id"], line["span_id"]) == (CALLER_TRACE, hex_span(span))
    assert line["actor_id"] == str(w.human.account_id)


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP collector that keeps the names of the spans it receives."""

    def __init__(self) -> None:
        self.names: list[str] = []

    async def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        for resource in request.resource_spans:
            service = [
                a.value.string_value
                for a in resource.resource.attributes
                if a.key == "service.name"
            ]
            for scope in resource.scope_spans:
                self.names.extend(f"{service[0]}:{s.name}" for s in scope.spans)
        return trace_service_pb2.ExportTraceServiceResponse()


async def test_spans_reach_the_configured_otlp_collector(
    database_url: str, tmp_path: pathlib.Path
) -> None:
    collector = Collector()
    otlp = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, otlp)  # type: ignore[no-untyped-call]
    port = otlp.add_insecure_port("127.0.0.1:0")
    await otlp.start()
    try:
        async with running_server(
            database_url,
            tmp_path,
            tracing_otlp_endpoint=f"http://127.0.0.1:{port}",
            tracing_otlp_insecure=True,
            tracing_service_name="compass-under-test",
        ) as srv:
            world = await World.create(srv.store)
            client = GrpcClient(srv.grpc_port)
            try:
                await client.call(
                    "ListChannels", pb.ListChannelsRequest(), world.tokens[world.human.account_id]
                )
            finally:
                await client.close()
        # Stopping the server flushes what it still held.
        assert "compass-under-test:CommsService/ListChannels" in collector.names
    finally:
        await otlp.stop(None)


async def test_without_an_endpoint_nothing_is_traced(
    database_url: str, tmp_path: pathlib.Path
) -> None:
    async with running_server(database_url, tmp_path) as srv:
        assert srv.tracer_provider is None and srv.observer.tracer is None


async def test_a_decline_joins_the_agents_turn_too(traced: Traced, world: World) -> None:
    w = world
    grpc_client = GrpcClient(traced.server.grpc_port)
    turn = "1" * 32
    try:
        async with relay(traced.server.grpc_port, await runner_for(w)) as r:
            await r.bound("scout", w.agent)
            call = gw.CommsCallRequest(
                post_ask=gw.PostAskRequest(
                    channel_id=str(w.channel.channel_id), ask=one_question()
                ),
                trigger_traceparent=traceparent(turn, TURN_SPAN),
            )
            ask_id = (await asyncio.wait_for(r.start_call("scout", call), WAIT)).post_ask.ask_id
            await grpc_client.call(
                "DeclineAsk",
                pb.DeclineAskRequest(ask_id=ask_id, reason="not now"),
                w.tokens[w.human.account_id],
            )
    finally:
        await grpc_client.close()
    declined = await traced.wait_for("ask declined", turn)
    assert dict(declined.attributes or {})["compass.ask_id"] == ask_id
    (person,) = traced.named("CommsService/DeclineAsk")
    # The person's call started a trace of its own, linked with the agent's.
    assert hex_trace(person) != turn
    assert [hex_span(person)] == [f"{link.context.span_id:016x}" for link in declined.links]
