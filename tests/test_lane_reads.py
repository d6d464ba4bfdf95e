"""A lane catching up reads from the database only the events that may be its
own: every kind of event, read by keys in SQL, matches what the hub's index
wakes lanes by (`event_keys`), page by page, with the scan's end reported."""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid

import pytest

from compass_server.events.hub import EventHub, Lane, event_keys
from compass_server.events.reach import Participations, Reach
from compass_server.relay.gateway import hears
from compass_server.store import Store
from compass_server.store.inbox import InboxStore
from compass_server.store.types import Actor, Answer, Event, PresenceState, TextBlock
from tests.test_inbox_store import yes_no
from tests.world import World


async def varied_log(
    store: Store, w: World | None = None
) -> tuple[World, list[World], list[Event]]:
    """A workspace whose log holds every kind of event, and all of it."""
    if w is None:
        w = await World.create(store)
    pairs = [await w.add_pair() for _ in range(3)]
    sub = await w.add_subagent("helper", w.agent)
    inbox = InboxStore(store.db)
    for i, p in enumerate(pairs):
        await store.append_message(p.human, p.channel.channel_id, [TextBlock(f"hello {i}")])
        answered = (await p.post_ask(p.agent)).blocks[0]
        await store.answer_ask(p.human, answered.ask_id, [Answer("db"), Answer("langs")])
        declined = (await p.post_ask(p.agent)).blocks[0]
        await store.decline_ask(p.human, declined.ask_id, "not now")
        cancelled = (await p.post_ask(p.agent)).blocks[0]
        await store.cancel_ask(p.agent, cancelled.ask_id)
        withdrawn = (await w.post_ask(w.agent)).blocks[0]
        await store.withdraw_ask(w.human, withdrawn.ask_id)
        item, _ = await inbox.post(p.agent, f"k{i}", "A question", "", ask=yes_no())
        await inbox.answer(w.human, item.item_id, [Answer("go", ("y",))], f"c{i}")
        await store.set_status(p.agent, PresenceState.WORKING, "thinking")
    # A channel the first pair's agent joins later, and a move in the tree.
    await store.add_channel_member(
        pairs[1].human, pairs[1].channel.channel_id, pairs[0].agent.account_id
    )
    await store.append_message(pairs[1].human, pairs[1].channel.channel_id, [TextBlock("both")])
    await w.reparent(sub, pairs[0].agent)
    await w.reparent(sub, None)
    log = []
    after = 0
    while page := await store.read_events(w.human, after, 500):
        log.extend(page)
        after = page[-1].event_id
    return w, pairs, log


async def read_as_lane(
    store: Store, w: World, keys: set[uuid.UUID], limit: int, max_bytes: int
) -> list[int]:
    got: list[int] = []
    after = 0
    head = await store.last_event_id(w.human)
    while after < head:
        events, scanned = await store.read_lane_events(w.human, after, keys, limit, max_bytes)
        ids = [e.event_id for e in events]
        assert ids == sorted(ids) and all(i > after for i in ids)
        assert len(ids) <= limit
        assert scanned >= (ids[-1] if ids else after + 1), (after, ids, scanned)
        if len(ids) < limit and sum(e.size for e in events) <= max_bytes:
            # Nothing was left out: the read passed the whole log.
            assert scanned == head, (scanned, head)
        got.extend(ids)
        after = scanned
    return got


async def test_a_lanes_reads_are_the_events_naming_its_keys(store: Store) -> None:
    w, pairs, log = await varied_log(store)
    kinds = {e.kind for e in log}
    assert len(kinds) == 6, kinds  # every kind of event is in the log
    rng = random.Random(7)
    every_key = sorted({k for e in log for k in event_keys(e)})
    key_sets = [{p.agent.account_id, p.channel.channel_id} for p in pairs] + [
        {pairs[0].agent.account_id, pairs[0].channel.channel_id, pairs[1].channel.channel_id},
        {w.human.account_id},
        set(rng.sample(every_key, 5)),
        {uuid.uuid4()},
        set(),
    ]
    for keys in key_sets:
        want = [e.event_id for e in log if keys & set(event_keys(e))]
        for limit, max_bytes in ((500, 1 << 20), (2, 1 << 20), (500, 1)):
            got = await read_as_lane(store, w, keys, limit, max_bytes)
            assert got == want, (keys, limit, max_bytes)


async def test_a_lane_read_returns_what_read_events_returns(store: Store) -> None:
    w, pairs, log = await varied_log(store)
    keys = {pairs[0].agent.account_id, pairs[0].channel.channel_id}
    by_id = {e.event_id: e for e in log}
    events, _ = await store.read_lane_events(w.human, 0, keys, 500)
    assert events
    for e in events:
        assert e == by_id[e.event_id]
        assert e.size == by_id[e.event_id].size


async def test_lanes_asked_together_are_told_which_have_events_naming_them(
    store: Store,
) -> None:
    w, _, log = await varied_log(store)
    head = await store.last_event_id(w.human)
    rng = random.Random(11)
    every_key = sorted({k for e in log for k in event_keys(e)})
    ids = [e.event_id for e in log]
    lanes: list[tuple[int, set[uuid.UUID]]] = []
    for _ in range(250):
        keys = set(rng.sample(every_key, rng.randint(0, 4)))
        if rng.random() < 0.2:
            keys.add(uuid.uuid4())
        lanes.append((rng.choice([0, *ids]), keys))
    found, seen_head = await store.lanes_with_events(w.human, lanes)
    assert seen_head == head
    want = {
        i
        for i, (after, keys) in enumerate(lanes)
        if any(e.event_id > after and keys & set(event_keys(e)) for e in log)
    }
    assert found == want
    assert 0 < len(want) < len(lanes)


async def heard_by(
    hub: EventHub, actor: Actor, participations: Participations, as_lane: bool, after: int = 0
) -> list[int]:
    """What the agent's delivery lane hears from the start of the log to its
    head, read as a lane (by keys) or as every event looked at, as the relay
    does it."""
    head = await hub.store.last_event_id(actor)
    reach = await Reach.of(participations, actor)
    passed = asyncio.Event()

    def went(event_id: int) -> None:
        if event_id >= head:
            passed.set()

    stream = hub.stream(
        actor,
        after,
        hears(actor.account_id, reach),
        actor.account_id,
        passed=went,
        lane=Lane(reach) if as_lane else None,
    )
    got = []
    try:
        while not passed.is_set():
            step = asyncio.ensure_future(anext(stream))
            at_head = asyncio.ensure_future(passed.wait())
            done, _ = await asyncio.wait({step, at_head}, timeout=30, return_when="FIRST_COMPLETED")
            at_head.cancel()
            if step not in done:
                step.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await step
                assert passed.is_set(), "the stream neither heard nor passed the log's head"
                break
            event = step.result()
            went(event.event_id)
            if event.moved is not None:
                await reach.reload()
                continue
            got.append(event.event_id)
    finally:
        await stream.aclose()
    return got


@pytest.mark.parametrize("page_bytes", [64, 1 << 20])
async def test_a_lane_behind_hears_by_keys_what_it_heard_looking_at_every_event(
    store: Store, database_url: str, page_bytes: int
) -> None:
    """Far behind a window of one event, pages of one event or many: a lane that
    joins channels and moves in the tree on the way hears the same events
    whether it reads by keys or looks at each."""
    w, pairs, _ = await varied_log(store)
    first = pairs[0].agent
    helper = await w.add_subagent("scribe", first)
    await store.append_message(pairs[0].human, pairs[0].channel.channel_id, [TextBlock("a")])
    # The helper moves under another agent: it hears that one's channels from then on.
    await w.reparent(helper, pairs[2].agent)
    await store.append_message(pairs[2].human, pairs[2].channel.channel_id, [TextBlock("b")])
    await store.append_message(pairs[0].human, pairs[0].channel.channel_id, [TextBlock("c")])
    await store.add_channel_member(
        pairs[1].human, pairs[1].channel.channel_id, pairs[2].agent.account_id
    )
    for i in range(40):
        p = pairs[i % 3]
        await store.append_message(p.human, p.channel.channel_id, [TextBlock(f"m{i}")])
    hub = EventHub(store, database_url, window_bytes=1, page_bytes=page_bytes)
    participations = Participations(store)
    for actor in (first, helper, pairs[1].agent, pairs[2].agent, w.agent):
        looked = await heard_by(hub, actor, participations, as_lane=False)
        keyed = await heard_by(hub, actor, participations, as_lane=True)
        assert keyed == looked, actor
        assert looked
    await hub.close()


async def test_lanes_catching_up_together_hear_what_each_heard_looking_at_every_event(
    store: Store, database_url: str
) -> None:
    """Lanes far behind at once (a restart) ask together whether anything
    names them; each still hears what it heard looking at every event."""
    w, pairs, _ = await varied_log(store)
    more = [await w.add_pair() for _ in range(6)]
    for i, p in enumerate(more[:3]):
        await store.append_message(p.human, p.channel.channel_id, [TextBlock(f"late {i}")])
    actors = [p.agent for p in pairs + more] + [w.agent]
    hub = EventHub(store, database_url, window_bytes=1, page_bytes=1 << 20)
    participations = Participations(store)
    looked = [await heard_by(hub, a, participations, as_lane=False) for a in actors]
    keyed = await asyncio.gather(*(heard_by(hub, a, participations, as_lane=True) for a in actors))
    assert keyed == looked
    assert all(looked[: len(pairs)]) and all(looked[len(pairs) : len(pairs) + 3])
    await hub.close()


async def test_a_lane_inside_the_window_hears_what_it_heard_looking_at_every_event(
    store: Store, database_url: str
) -> None:
    """Events loaded into the feed's window while lanes are behind them: a
    lane goes from one event naming it to the next, and hears what it heard
    looking at every event."""
    w = await World.create(store)
    hub = EventHub(store, database_url)
    await hub.start()
    start = await store.last_event_id(w.human)
    holder = hub.stream(w.human, start, lambda e: True, w.human.account_id)
    first = asyncio.ensure_future(anext(holder))
    await asyncio.sleep(0.2)  # the feed exists; what follows loads into its window
    _, pairs, _ = await varied_log(store, w)
    helper = await w.add_subagent("scribe", pairs[0].agent)
    await w.reparent(helper, pairs[2].agent)
    for i in range(30):
        p = pairs[i % 3]
        await store.append_message(p.human, p.channel.channel_id, [TextBlock(f"m{i}")])
    head = await store.last_event_id(w.human)
    await first
    while (await asyncio.wait_for(anext(holder), 10)).event_id < head:
        pass
    feed = hub.feeds[w.human.workspace_id]
    assert feed.window[0].event_id <= start + 1 and feed.head == head
    participations = Participations(store)
    for actor in (pairs[0].agent, helper, pairs[1].agent, pairs[2].agent, w.agent):
        looked = await heard_by(hub, actor, participations, as_lane=False, after=start)
        keyed = await heard_by(hub, actor, participations, as_lane=True, after=start)
        assert keyed == looked, actor
        assert looked
    await holder.aclose()
    await hub.close()


@pytest.mark.parametrize("as_lane", [False, True])
async def test_a_lane_joining_a_channel_while_it_catches_up_hears_that_channel(
    store: Store, database_url: str, as_lane: bool
) -> None:
    """The agent joins a channel after its lane read what it takes part in,
    before the lane's page of the log holding the join and a message after
    it: read by the keys it had when the page was asked for, the message
    would be passed unheard."""
    _, pairs, _ = await varied_log(store)
    agent = pairs[0].agent
    joined = pairs[2]
    hub = EventHub(store, database_url, window_bytes=1, page_bytes=1 << 20)
    await hub.start()
    reach = await Reach.of(Participations(store), agent)
    stream = hub.stream(
        agent,
        0,
        hears(agent.account_id, reach),
        agent.account_id,
        lane=Lane(reach) if as_lane else None,
    )
    await store.add_channel_member(joined.human, joined.channel.channel_id, agent.account_id)
    said = await store.append_message(
        joined.human, joined.channel.channel_id, [TextBlock("now you hear this")]
    )
    got: list[int] = []
    try:
        while True:
            event = await asyncio.wait_for(anext(stream), 1.0)
            got.append(event.event_id)
            if event.message is not None and event.message.message_id == said.message_id:
                break
    except TimeoutError:
        raise AssertionError(f"the message after the join was not heard: {got}") from None
    finally:
        await stream.aclose()
        await hub.close()


async def test_what_an_account_takes_part_in_is_the_views_rows(store: Store) -> None:
    """The participation a bind reads (through its indexes) is what the
    compass_participation view says, for people, root agents and agents
    moved under others."""
    w, pairs, _ = await varied_log(store)
    deep = await w.add_subagent("deep", pairs[0].agent)
    deeper = await w.add_subagent("deeper", deep)
    await store.add_channel_member(pairs[2].human, pairs[2].channel.channel_id, deep.account_id)
    for actor in (w.human, w.agent, pairs[0].agent, pairs[1].human, deep, deeper):
        read = await store.participation(actor)
        async with store.db.tx(actor) as conn:
            cur = await conn.execute(
                "SELECT channel_id, min(since) AS since FROM compass_participation "
                "WHERE account_id = %s GROUP BY channel_id",
                (actor.account_id,),
            )
            view = {r["channel_id"]: r["since"] for r in await cur.fetchall()}
        assert read.channels == view, actor
        assert view, actor
