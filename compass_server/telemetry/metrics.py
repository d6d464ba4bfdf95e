"""The Prometheus metrics of one server process (prometheus-client).

Counters and histograms move as the work happens; gauges are sampled when
/metrics is scraped, each sampler bounded in time so a slow database can't
hold a scrape. Every process reports its own; the database-wide gauges (open
asks, webhook deliveries owed) are the same on every process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

log = logging.getLogger(__name__)

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
# How long one sampler may take before a scrape goes on with its last value.
SAMPLE_SECONDS = 2.0
# From a cached sign-in (~0.3 ms) to a relay call that waits on the database.
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.calls = Histogram(
            "compass_rpc_duration_seconds",
            "Calls by transport (grpc, connect, relay), method and status, and how long they "
            "took; a stream counts when it ends.",
            ["transport", "method", "status"],
            buckets=BUCKETS,
            registry=r,
        )
        self.asks_ended = Counter(
            "compass_asks_ended",
            "Asks ended through this process, by how they ended.",
            ["kind"],
            registry=r,
        )
        self.open_asks = Gauge(
            "compass_open_asks", "Asks open in the database, channel and inbox.", registry=r
        )
        self.relay_sessions = Gauge(
            "compass_relay_sessions", "Runner sessions bound on this process.", registry=r
        )
        self.subscribers = Gauge(
            "compass_subscribers", "Subscribe streams open on this process.", registry=r
        )
        self.delivery_lag = Gauge(
            "compass_delivery_lag_events",
            "Events committed that a stream on this process has not yet passed to its client "
            "(the most behind of them).",
            registry=r,
        )
        self.delivery_wakeups = Counter(
            "compass_delivery_wakeups",
            "Times a waiting stream (a relay lane, a Subscribe stream) was woken to read new "
            "events: a relay lane only by an event that may be its own.",
            registry=r,
        )
        self.webhook_pending = Gauge(
            "compass_webhook_deliveries_pending",
            "Webhook deliveries owed, in the database: made and still to be sent (due or "
            "waiting for a retry), and those the log holds that no courier has made yet.",
            registry=r,
        )
        self.webhook_oldest = Gauge(
            "compass_webhook_oldest_pending_seconds",
            "How long the oldest webhook delivery owed has waited, in the database.",
            registry=r,
        )
        self.pool_in_use = Gauge(
            "compass_db_pool_in_use", "Database connections in use, by pool.", ["pool"], registry=r
        )
        self.pool_waiting = Gauge(
            "compass_db_pool_waiting",
            "Requests waiting for a database connection, by pool.",
            ["pool"],
            registry=r,
        )
        self.database_up = Gauge(
            "compass_database_up",
            "1 while this process finds the database answering; 0 while it doesn't, and "
            "calls fail at once with UNAVAILABLE.",
            registry=r,
        )
        self.database_up.set(1)
        self.writes = Histogram(
            "compass_write_batch_writes",
            "Statements that wrote posts or ask endings (kind: post, ending), by how many "
            "writes each carried: 1 went alone, more waited and went together.",
            ["kind"],
            buckets=(1, 2, 4, 8, 16, 32, 64),
            registry=r,
        )
        self.samplers: list[Callable[[], Awaitable[None]]] = []

    def observe_call(self, transport: str, method: str, status: str, seconds: float) -> None:
        self.calls.labels(transport, method, status).observe(seconds)

    def wrote(self, kind: str, count: int) -> None:
        self.writes.labels(kind).observe(count)

    def ended(self, kind: str, count: int = 1, message: object = None) -> None:
        self.asks_ended.labels(kind).inc(count)

    async def scrape(self) -> bytes:
        """The exposition text, gauges sampled now."""
        for sample in self.samplers:
            try:
                async with asyncio.timeout(SAMPLE_SECONDS):
                    await sample()
            except Exception as exc:
                log.warning("sampling metrics failed (%s); reporting the last values", exc)
        return generate_latest(self.registry)
