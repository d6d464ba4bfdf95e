"""Traces with OpenTelemetry: the provider a configuration asks for (none:
tracing is off), W3C trace context in and out, and a span per store
statement run inside a traced call."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from psycopg import AsyncCursor

from compass_server.store.types import Ask, Message

log = logging.getLogger(__name__)

TRACER_NAME = "compass_server"
PROPAGATOR = TraceContextTextMapPropagator()
# A statement's text on its span is cut here: the queries are ours, not a client's.
STATEMENT_CHARS = 2_000


def provider_for(
    endpoint: str | None,
    *,
    headers: str | None = None,
    insecure: bool = False,
    service_name: str = "compass-server",
    sample_ratio: float = 1.0,
) -> TracerProvider | None:
    """An SDK provider exporting over OTLP/gRPC to `endpoint`; None without one."""
    if not endpoint:
        return None
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    provider = TracerProvider(
        resource=Resource.create({"service.name": service_name}),
        sampler=ParentBased(TraceIdRatioBased(sample_ratio)),
    )
    pairs = dict(
        (k.strip().lower(), v.strip())
        for k, _, v in (p.partition("=") for p in (headers or "").split(","))
        if k.strip()
    )
    exporter = OTLPSpanExporter(endpoint=endpoint, insecure=insecure, headers=pairs or None)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def parent_context(headers: Mapping[str, str] | None, traceparent: str = "") -> Context:
    """The caller's trace from W3C headers or a bare traceparent; an empty
    context (a new trace) when neither holds a valid one."""
    carrier: dict[str, str] = {}
    if headers is not None:
        for key in ("traceparent", "tracestate"):
            value = headers.get(key)
            if value:
                carrier[key] = value
    if traceparent:
        carrier = {"traceparent": traceparent}
    return PROPAGATOR.extract(carrier, context=Context()) if carrier else Context()


def traceparent_of(span: trace.Span | None = None) -> str:
    """The W3C traceparent of `span` (default: the current one); "" if none."""
    span = span if span is not None else trace.get_current_span()
    if not span.get_span_context().is_valid:
        return ""
    carrier: dict[str, str] = {}
    PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get("traceparent", "")


def cursor_class(tracer: trace.Tracer) -> type[AsyncCursor[Any]]:
    """A psycopg cursor whose statements inside a traced call are child spans."""

    class TracedCursor(AsyncCursor[Any]):
        async def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            if not trace.get_current_span().get_span_context().is_valid:
                return await super().execute(query, params, **kwargs)
            text = query.decode() if isinstance(query, bytes) else str(query)
            words = text.split(None, 2)
            # "SELECT compass_post_message(" names the statement better than "SELECT".
            name = " ".join(words[:2])[:60] if words else "statement"
            with tracer.start_as_current_span(
                f"db {name}",
                kind=SpanKind.CLIENT,
                attributes={
                    "db.system.name": "postgresql",
                    "db.query.text": text[:STATEMENT_CHARS],
                },
            ):
                return await super().execute(query, params, **kwargs)

    return TracedCursor


class AskTraces:
    """Joins an ask's ending to the trace of the call that posted it: the
    ending is a span there, linked both ways with the call that ended it (a
    person's answer has a trace of its own)."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer

    def ended(self, kind: str, count: int, message: Message | None) -> None:
        if message is None:
            return
        current = trace.get_current_span()
        here = current.get_span_context()
        for block in message.blocks:
            if not isinstance(block, Ask) or not block.trace:
                continue
            span = self.tracer.start_span(
                f"ask {kind}",
                context=parent_context(None, block.trace),
                links=[Link(here)] if here.is_valid else [],
                attributes={"compass.ask_id": block.ask_id, "compass.ending": kind},
            )
            span.end()
            if here.is_valid:
                current.add_link(span.get_span_context())
                current.set_attribute("compass.ask_id", block.ask_id)
