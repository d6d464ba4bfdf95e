"""One call as an operator sees it: a span (when tracing is on), its count and
latency, and an access log line, the same for gRPC, Connect and relay calls.

The transports open a call with `Observer.call`, say who signed in with
`Call.signed_in` and its outcome with `Call.status`; everything else is here.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, StatusCode

from compass_server.store.types import Actor, RunnerPrincipal
from compass_server.telemetry import traces

if TYPE_CHECKING:
    from compass_server.telemetry.metrics import Metrics

access_log = logging.getLogger("compass_server.access")

# gRPC's numbers for the status tokens, for the span's rpc.grpc.status_code.
GRPC_CODES = {
    "ok": 0,
    "cancelled": 1,
    "unknown": 2,
    "invalid_argument": 3,
    "deadline_exceeded": 4,
    "not_found": 5,
    "already_exists": 6,
    "permission_denied": 7,
    "resource_exhausted": 8,
    "failed_precondition": 9,
    "unimplemented": 12,
    "internal": 13,
    "unavailable": 14,
    "unauthenticated": 16,
}
# The server's own failures mark a span as an error; a client's mistake doesn't.
SERVER_FAULTS = frozenset({"unknown", "internal", "unavailable", "unimplemented"})


@dataclass(slots=True)
class Call:
    transport: str  # grpc, connect or relay
    method: str  # Service/Method, or relay/<arm>
    actor_id: str = ""
    actor_kind: str = ""
    status: str = "ok"
    span: trace.Span | None = field(default=None, repr=False)

    def signed_in(self, principal: Actor | RunnerPrincipal) -> None:
        if isinstance(principal, Actor):
            self.actor_id, self.actor_kind = str(principal.account_id), principal.kind.value
        else:
            self.actor_id, self.actor_kind = str(principal.runner_id), "runner"


_CURRENT: contextvars.ContextVar[Call | None] = contextvars.ContextVar("compass_call", default=None)


def current_call() -> Call | None:
    return _CURRENT.get()


class Observer:
    """A server's view of its calls: spans through `tracer` (None: tracing is
    off and costs nothing), metrics, and access log lines."""

    def __init__(
        self,
        tracer: trace.Tracer | None = None,
        metrics: Metrics | None = None,
        access: bool = True,
    ) -> None:
        self.tracer = tracer
        self.metrics = metrics
        self.access = access

    @contextlib.contextmanager
    def call(
        self,
        transport: str,
        method: str,
        *,
        headers: Mapping[str, str] | None = None,
        traceparent: str = "",
        link_current: bool = False,
        attach: bool = True,
    ) -> Iterator[Call]:
        """Observes the call run inside. A caller's trace continues from W3C
        `headers` (gRPC metadata, HTTP headers) or a `traceparent`; with
        neither the call starts a trace, linked to the current span when
        `link_current` (a relay call to its stream). `attach` makes the span
        current, so the store's statements become its children; an async
        generator's span isn't attached (its frames run between others)."""
        call = Call(transport, method)
        token = _CURRENT.set(call)
        started = time.perf_counter()
        attached = None
        if self.tracer is not None:
            links = []
            if link_current:
                current = trace.get_current_span().get_span_context()
                if current.is_valid:
                    links.append(Link(current))
            parent = traces.parent_context(headers, traceparent)
            service, _, name = method.rpartition("/")
            call.span = self.tracer.start_span(
                method,
                context=parent,
                kind=SpanKind.SERVER,
                links=links,
                attributes={
                    "rpc.system": "grpc" if transport == "grpc" else f"compass.{transport}",
                    "rpc.service": service,
                    "rpc.method": name,
                    "compass.transport": transport,
                },
            )
            if attach:
                attached = otel_context.attach(trace.set_span_in_context(call.span))
        try:
            yield call
        except (asyncio.CancelledError, GeneratorExit):
            # The client went away (or the server is stopping).
            if call.status == "ok":
                call.status = "cancelled"
            raise
        except BaseException:
            if call.status == "ok":
                call.status = "internal"
            raise
        finally:
            seconds = time.perf_counter() - started
            if self.metrics is not None:
                self.metrics.observe_call(transport, method, call.status, seconds)
            if self.access:
                access_log.info(
                    "%s %s %s %.1f ms%s",
                    transport,
                    method,
                    call.status,
                    seconds * 1000,
                    f" {call.actor_kind} {call.actor_id}" if call.actor_id else "",
                    extra={
                        "fields": {
                            "transport": transport,
                            "status": call.status,
                            "duration_ms": round(seconds * 1000, 3),
                        }
                    },
                )
            if call.span is not None:
                _finish(call)
            if attached is not None:
                otel_context.detach(attached)
            _CURRENT.reset(token)


def _finish(call: Call) -> None:
    span = call.span
    assert span is not None
    span.set_attribute("compass.status", call.status)
    span.set_attribute("rpc.grpc.status_code", GRPC_CODES.get(call.status, 2))
    if call.actor_kind:
        span.set_attribute("compass.actor.kind", call.actor_kind)
        span.set_attribute("compass.actor.id", call.actor_id)
    if call.status in SERVER_FAULTS:
        span.set_status(StatusCode.ERROR, call.status)
    span.end()
