"""Every byte-bounded cache and window holds what its bound says in real
memory, not in encoded bytes: each is filled past its bound with the worst
shape (asks of many small options, as decoded from the database) and its
growth, as tracemalloc and as C's allocator see it, stays within the bound
× `FACTOR` (protobuf messages live outside Python's allocator: only malloc
sees them)."""

from __future__ import annotations

import ctypes
import datetime
import gc
import json
import pathlib
import tracemalloc
import uuid
from collections.abc import Callable

import pytest

from compass.v1 import agent_gateway_pb2 as gw
from compass_server.api import mapping as wire
from compass_server.api.comms import CommsApi
from compass_server.events.hub import Feed
from compass_server.receipts import Receipts
from compass_server.receipts.keys import ReceiptKeys
from compass_server.relay.gateway import FRAME_BYTES, Outbox
from compass_server.store import Store
from compass_server.store import blocks as blockrules
from compass_server.store.asks import AskCache
from compass_server.store.types import Ask, AskEnding, AskOption, AskQuestion, EndingKind, Event
from compass_server.store.weight import weigh
from tests.world import World

MIB = 1 << 20
# What a bound may be exceeded by: entries' bookkeeping the counts estimate.
FACTOR = 1.25
# Python's own objects over 512 bytes come from malloc too, and so do
# transient buffers: this much besides, for what malloc sees.
MALLOC_SLACK = 1 * MIB


def many_options(ask_id: str = "") -> Ask:
    """The worst shape: 20 questions of 50 options, each a two-letter id and
    label (one-letter strings are shared by Python and would weigh nothing)."""
    return Ask(
        questions=tuple(
            AskQuestion(
                question_id=f"q{q:02d}",
                question=f"q{q:02d}",
                options=tuple(AskOption(id=f"{o:02d}", label=f"{o:02d}") for o in range(50)),
            )
            for q in range(20)
        ),
        ask_id=ask_id,
    )


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
        ).split()
    ]


_mallinfo2 = ctypes.CDLL(None).mallinfo2
_mallinfo2.restype = _MallInfo2


def _malloced() -> int:
    """Bytes malloc has handed out and not had back (glibc)."""
    info = _mallinfo2()
    return int(info.uordblks + info.hblkhd)


class Growth:
    """Memory held at the end of a block beyond what was held at its start."""

    def __enter__(self) -> Growth:
        gc.collect()
        tracemalloc.start()
        self.malloced = _malloced()
        return self

    def __exit__(self, *_: object) -> None:
        gc.collect()
        self.traced = tracemalloc.get_traced_memory()[0]
        # Less what tracemalloc itself took from malloc for its traces.
        self.malloced = _malloced() - self.malloced - tracemalloc.get_tracemalloc_memory()
        tracemalloc.stop()

    def within(self, bound: int) -> None:
        print(f"traced {self.traced / MIB:.2f} MiB, malloc {self.malloced / MIB:.2f} MiB")
        assert self.traced <= bound * FACTOR, f"held {self.traced} bytes for a bound of {bound}"
        assert self.malloced <= bound * FACTOR + MALLOC_SLACK, (
            f"malloc holds {self.malloced} bytes more for a bound of {bound}"
        )


def test_weigh_counts_what_tracemalloc_sees() -> None:
    raw = blockrules.block_to_json(many_options("a"))
    encoded = json.dumps(raw)
    gc.collect()
    tracemalloc.start()
    decoded = [blockrules.block_from_json(json.loads(encoded)) for _ in range(20)]
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    counted = sum(weigh(a) for a in decoded)
    # An upper bound, and a close one.
    assert held <= counted <= held * 1.2, (held, counted)
    # Several times its encoded bytes: why bounds count this instead.
    assert counted / len(decoded) > 4 * len(encoded)


def test_the_ask_cache_holds_its_bound_of_many_option_asks() -> None:
    bound = 2 * MIB
    cache = AskCache(bound)
    raw = blockrules.block_to_json(many_options())
    size = blockrules.encoded_size(raw)
    encoded = json.dumps(raw)
    with Growth() as growth:
        # Three times the bound, as encoded.
        for i in range(3 * bound // size):
            parsed = json.loads(encoded)
            parsed["ask"]["ask_id"] = f"ask-{i:06d}"
            ask = blockrules.block_from_json(parsed)
            assert isinstance(ask, Ask)
            cache.put(ask, size)
            del ask, parsed
    assert cache.get(f"ask-{3 * bound // size - 1:06d}") is not None
    growth.within(bound)


def test_receipts_kept_signed_hold_their_bound(tmp_path: pathlib.Path) -> None:
    bound = 256 << 10
    receipts = Receipts(ReceiptKeys.load(tmp_path, create=True), "https://compass.test", bound)
    at = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    workspace, asker = uuid.uuid4(), uuid.uuid4()
    question = AskQuestion(question_id="q", question="Ship it?")
    with Growth() as growth:
        for i in range(2_000):
            ask = Ask(
                questions=(question,),
                ask_id=f"ask-{i:06d}",
                ending=AskEnding(EndingKind.DECLINED, at, uuid.uuid4(), "lin"),
            )
            assert receipts.sign(workspace, asker, ask)
            del ask
    growth.within(bound)


async def _many_option_events(store: Store, n: int) -> tuple[World, int, list[Event]]:
    """n messages of 5 many-option asks each (~250 KB as stored) and their
    events, read back from the log as every stream reads them."""
    w = await World.create(store)
    before = await store.last_event_id(w.agent)
    for _ in range(n):
        await store.append_message(w.agent, w.channel.channel_id, [many_options()] * 5)
    events = await store.read_events(w.agent, before, n, 64 * MIB)
    assert len(events) == n
    return w, before, events


async def test_the_event_window_holds_its_bound_in_real_bytes(store: Store) -> None:
    bound = 2 * MIB
    w, before, events = await _many_option_events(store, 12)
    last = await store.last_event_id(w.agent)
    # What an event is counted at covers what it holds.
    gc.collect()
    tracemalloc.start()
    again = await store.read_events(w.agent, before, 12, 64 * MIB)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert held <= sum(e.size for e in again) <= held * 1.3
    del again, events
    with Growth() as growth:
        feed = Feed(store, w.agent, before, bound, 1 * MIB)
        feed.poke(last)
        assert feed._loading is not None
        await feed._loading
        assert feed.head == last
    assert feed.window and feed.window[-1].event_id == last and len(feed.window) > 1
    growth.within(bound)


async def test_the_wire_cache_holds_its_bound_in_real_bytes(store: Store) -> None:
    bound = 1 * MIB
    w, _, events = await _many_option_events(store, 16)
    comms = CommsApi(store, None, wire_cache_bytes=bound)  # type: ignore[arg-type]
    with Growth() as growth:
        for event in events:
            comms._wire_event(w.workspace_id, event)
    # Every subscriber gets the same event, cached or not.
    first = comms._wire_event(w.workspace_id, events[-1])
    assert first == comms._wire_event(w.workspace_id, events[-1])
    assert len(first.message_posted.message.blocks) == 5
    growth.within(bound)


async def test_a_relay_outbox_holds_its_bound_in_real_bytes(store: Store) -> None:
    bound = 1 * MIB
    w, _, events = await _many_option_events(store, 16)
    outbox = Outbox(bound)
    receipts = Receipts(None, "")

    def frame(event: Event) -> Callable[[], gw.HubFrame]:
        return lambda: gw.HubFrame(
            delivery=gw.Delivery(
                session_id="s",
                event=wire.event_to_wire(event, receipts.stamp(w.workspace_id)),
            )
        )

    with Growth() as growth:
        put = 0
        for event in events:
            size = event.size + FRAME_BYTES
            if outbox.bytes and outbox.bytes + size > bound:
                break  # a delivery would wait here for the runner to read
            await outbox.put(size, frame(event))
            put += 1
    assert put >= 2
    got, _ = await outbox.get()
    assert got is not None and got.delivery.event.event_id == events[0].event_id
    growth.within(bound)


@pytest.fixture(autouse=True)
def _no_tracemalloc() -> object:
    yield
    if tracemalloc.is_tracing():
        tracemalloc.stop()
