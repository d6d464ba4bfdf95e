"""Agent trees at the store: an agent takes part in every channel that it or
an agent above it is a member of, and in no other; moving it (and the agents
below it) changes that at once; the tree's own rules hold in the database."""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compass_server.store import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Store,
)
from compass_server.store.trees import MAX_AGENT_DEPTH, MAX_TREE_AGENTS
from compass_server.store.types import (
    AccountKind,
    Actor,
    Answer,
    Ask,
    Channel,
    Operator,
    PresenceState,
    TextBlock,
)
from tests.world import World, two_question_ask


def ask_of(message_blocks: tuple[object, ...]) -> Ask:
    (ask,) = [b for b in message_blocks if isinstance(b, Ask)]
    return ask


async def state_of(w: World, agent: Actor) -> PresenceState:
    (presence,) = await w.store.get_presence(w.human, [agent.account_id])
    return presence.state


async def reaches(store: Store, who: Actor) -> set[uuid.UUID]:
    page = await store.list_channels(who, 200, "")
    return {c.channel_id for c in page.items}


async def test_a_subtree_author_reads_and_writes_in_an_ancestors_channel(world: World) -> None:
    w, store = world, world.store
    general = w.channel.channel_id
    planner = await w.add_subagent("planner", w.agent)
    worker = await w.add_subagent("worker", planner)
    for who in (planner, worker):
        assert await reaches(store, who) == {general}
        changed = await store.update_topic(who, general, f"set by {who.account_id}")
        assert changed.topic == f"set by {who.account_id}"
        posted = await store.append_message(who, general, [TextBlock(f"hello {who.account_id}")])
        assert (await store.get_message(who, posted.message_id)).author_id == who.account_id
        page = await store.list_messages(who, general, 50, "")
        assert posted.message_id in [m.message_id for m in page.items]
        found = await store.search_messages(who, f"hello {who.account_id}", None, 50, "")
        assert [m.message_id for m in found.items] == [posted.message_id]
        # Its parent and the person see it like any member's message.
        for reader in (w.agent, w.human):
            assert (await store.get_message(reader, posted.message_id)).author_id == who.account_id
        added = await store.add_channel_member(who, general, w.other_human.account_id)
        assert w.other_human.account_id in added.member_ids
        # Members are who joined: taking part through the tree adds no member.
        assert who.account_id not in added.member_ids


async def test_a_subagents_asks_are_its_own(world: World) -> None:
    w, store = world, world.store
    planner = await w.add_subagent("planner", w.agent)
    first = ask_of((await w.post_ask(planner)).blocks)
    second = ask_of((await w.post_ask(planner)).blocks)
    assert await state_of(w, planner) is PresenceState.WAITING
    assert await state_of(w, w.agent) is not PresenceState.WAITING
    _, read = await store.get_ask(w.agent, first.ask_id)
    assert read.ask_id == first.ask_id
    with pytest.raises(PermissionDenied):
        await store.cancel_ask(w.agent, first.ask_id)
    await store.cancel_ask(planner, first.ask_id)
    # The person answers the other; the ask ends and the sub-agent stops waiting.
    await store.answer_ask(w.human, second.ask_id, [Answer("db"), Answer("langs")])
    assert await state_of(w, planner) is not PresenceState.WAITING
    # The owner of the whole tree may withdraw a sub-agent's ask.
    third = ask_of((await w.post_ask(planner)).blocks)
    _, changed = await store.withdraw_ask(w.human, third.ask_id)
    assert changed


async def test_after_a_move_the_same_calls_are_not_found(world: World) -> None:
    w, store = world, world.store
    general = w.channel.channel_id
    planner = await w.add_subagent("planner", w.agent)
    worker = await w.add_subagent("worker", planner)
    posted = await store.append_message(planner, general, [TextBlock("before the move")])
    ranger = await w.add_account("ranger", AccountKind.AGENT)
    ops = await store.create_channel(w.human, "ops", "", [ranger.account_id])

    await w.reparent(planner, ranger)
    for who in (planner, worker):
        # The seed's expectation: UpdateTopic by a moved agent is NOT_FOUND.
        with pytest.raises(NotFound):
            await store.update_topic(who, general, "after the move")
        with pytest.raises(NotFound):
            await store.append_message(who, general, [TextBlock("after the move")])
        with pytest.raises(NotFound):
            await store.list_messages(who, general, 50, "")
        with pytest.raises(NotFound):
            await store.get_message(who, posted.message_id)
        with pytest.raises(NotFound):
            await store.add_channel_member(who, general, w.other_human.account_id)
        assert (await store.search_messages(who, "before the move", None, 50, "")).items == []
        assert await reaches(store, who) == {ops.channel_id}
        await store.append_message(who, ops.channel_id, [TextBlock("in the new chain")])
    topics = {c.channel_id: c.topic for c in (await store.list_channels(w.human, 200, "")).items}
    assert topics[general] == ""

    # Made a root, it reaches only what it is a member of itself: nothing.
    await w.reparent(planner, None)
    assert await reaches(store, planner) == set()
    assert await reaches(store, worker) == set()


async def test_siblings_and_parents_never_reach_a_subagents_own_channels(world: World) -> None:
    w, store = world, world.store
    alpha = await w.add_subagent("alpha", w.agent)
    beta = await w.add_subagent("beta", w.agent)
    side = await store.create_channel(w.human, "alpha-only", "", [alpha.account_id])
    said = await store.append_message(alpha, side.channel_id, [TextBlock("alpha only")])
    asked = ask_of((await w.post_ask(alpha, channel=side)).blocks)
    assert await reaches(store, alpha) == {w.channel.channel_id, side.channel_id}
    for who in (beta, w.agent):
        assert side.channel_id not in await reaches(store, who)
        with pytest.raises(NotFound):
            await store.update_topic(who, side.channel_id, "not yours")
        with pytest.raises(NotFound):
            await store.append_message(who, side.channel_id, [TextBlock("not yours")])
        with pytest.raises(NotFound):
            await store.list_messages(who, side.channel_id, 50, "")
        with pytest.raises(NotFound):
            await store.get_message(who, said.message_id)
        with pytest.raises(NotFound):
            await store.get_ask(who, asked.ask_id)
        with pytest.raises(NotFound):
            await store.cancel_ask(who, asked.ask_id)
        with pytest.raises(NotFound):
            await store.add_channel_member(who, side.channel_id, who.account_id)
        assert (await store.search_messages(who, "alpha only", None, 50, "")).items == []


async def test_cycles_other_owners_people_and_other_workspaces_are_refused(
    world: World, store: Store
) -> None:
    w = world
    planner = await w.add_subagent("planner", w.agent)
    worker = await w.add_subagent("worker", planner)
    with pytest.raises(FailedPrecondition, match="own ancestor"):
        await w.reparent(w.agent, worker)
    with pytest.raises(FailedPrecondition, match="own ancestor"):
        await w.reparent(planner, planner)
    graces, _ = await store.create_account(
        w.workspace_id, "rover", AccountKind.AGENT, w.other_human.account_id
    )
    rover = Actor(w.workspace_id, graces.account_id, AccountKind.AGENT, b"")
    with pytest.raises(InvalidArgument, match="same owner"):
        await w.reparent(planner, rover)
    with pytest.raises(InvalidArgument, match="same owner"):
        await store.admin.create_account(
            Operator(w.workspace_id),
            "stray",
            AccountKind.AGENT,
            w.human.account_id,
            parent_id=rover.account_id,
        )
    with pytest.raises(NotFound):
        await w.reparent(planner, w.human)
    with pytest.raises(InvalidArgument):
        await store.admin.create_account(
            Operator(w.workspace_id), "person", AccountKind.HUMAN, parent_id=planner.account_id
        )
    elsewhere = await World.create(store)
    with pytest.raises(NotFound):
        await w.reparent(planner, elsewhere.agent)
    with pytest.raises(NotFound):
        await store.admin.create_account(
            Operator(w.workspace_id),
            "lost",
            AccountKind.AGENT,
            parent_id=elsewhere.agent.account_id,
        )
    # Nothing moved.
    assert (await store.get_account(w.human, worker.account_id)).parent_id == planner.account_id
    assert (await store.get_account(w.human, w.agent.account_id)).parent_id is None


async def test_a_tree_is_at_most_max_agent_depth_deep(world: World) -> None:
    w = world
    chain = [w.agent]
    for depth in range(1, MAX_AGENT_DEPTH + 1):
        chain.append(await w.add_subagent(f"d{depth}", chain[-1]))
    with pytest.raises(ResourceExhausted, match=f"more than {MAX_AGENT_DEPTH} agents below"):
        await w.add_subagent("too-deep", chain[-1])
    # Moving a subtree two deep under the agent one above the bottom is too deep as well.
    side = await w.add_subagent("side", w.agent)
    await w.add_subagent("side-child", side)
    with pytest.raises(ResourceExhausted):
        await w.reparent(side, chain[-2])
    await w.reparent(side, chain[-3])
    # The deepest agent still reaches its root's channel.
    assert await reaches(w.store, chain[-1]) == {w.channel.channel_id}


async def test_a_tree_holds_at_most_max_tree_agents(world: World) -> None:
    w = world
    for i in range(MAX_TREE_AGENTS - 1):
        await w.add_subagent(f"sub{i}", w.agent)
    with pytest.raises(ResourceExhausted, match=f"more than {MAX_TREE_AGENTS} agents"):
        await w.add_subagent("one-too-many", w.agent)
    loner = await w.add_account("loner", AccountKind.AGENT)
    with pytest.raises(ResourceExhausted):
        await w.reparent(loner, w.agent)


async def test_a_move_waits_for_the_open_asks_below_it(world: World) -> None:
    w, store = world, world.store
    planner = await w.add_subagent("planner", w.agent)
    worker = await w.add_subagent("worker", planner)
    ranger = await w.add_account("ranger", AccountKind.AGENT)
    asked = ask_of((await w.post_ask(worker)).blocks)
    for moving in (planner, worker):
        with pytest.raises(FailedPrecondition, match="@worker has 1 open ask"):
            await w.reparent(moving, ranger)
    assert (await store.get_account(w.human, planner.account_id)).parent_id == w.agent.account_id
    await store.cancel_ask(worker, asked.ask_id)
    await w.reparent(planner, ranger)
    assert (await store.get_account(w.human, worker.account_id)).parent_id == planner.account_id


async def test_two_moves_at_once_never_make_a_cycle(world: World) -> None:
    w = world
    for trial in range(8):
        a = await w.add_account(f"a{trial}", AccountKind.AGENT)
        b = await w.add_account(f"b{trial}", AccountKind.AGENT)
        results = await asyncio.gather(w.reparent(a, b), w.reparent(b, a), return_exceptions=True)
        refused = [r for r in results if isinstance(r, BaseException)]
        assert len(refused) == 1 and isinstance(refused[0], FailedPrecondition), results
        pa = (await w.store.get_account(w.human, a.account_id)).parent_id
        pb = (await w.store.get_account(w.human, b.account_id)).parent_id
        assert {pa, pb} in ({b.account_id, None}, {a.account_id, None})


async def test_posts_racing_a_move_either_land_before_it_or_are_not_found(world: World) -> None:
    """Every post either took part through the old chain before the move
    committed, or is NOT_FOUND after it; an ask that landed keeps the move
    from happening, so no open ask is ever left where its agent can't reach."""
    w, store = world, world.store
    general = w.channel.channel_id
    ranger = await w.add_account("ranger", AccountKind.AGENT)
    rng = random.Random(20)
    outcomes = set()
    # Texts every millisecond or so, one ask among them, the move somewhere in between.
    delays = [0.0015 * i for i in range(10)]
    for trial in range(24):
        planner = await w.add_subagent(f"p{trial}", w.agent)
        asking = rng.randrange(len(delays))

        async def post(i: int, planner: Actor = planner, asking: int = asking) -> tuple[str, bool]:
            await asyncio.sleep(delays[i])
            kind = "ask" if i == asking else "text"
            blocks = [two_question_ask()] if kind == "ask" else [TextBlock(f"text {i}")]
            try:
                await store.append_message(planner, general, blocks)
            except NotFound:
                return (kind, False)
            return (kind, True)

        async def move(planner: Actor = planner, delay: float = rng.uniform(0, 0.012)) -> bool:
            await asyncio.sleep(delay)
            try:
                await w.reparent(planner, ranger)
            except FailedPrecondition:
                return False
            return True

        *posts, moved = await asyncio.gather(*(post(i) for i in range(len(delays))), move())
        asked = any(kind == "ask" and ok for kind, ok in posts)
        outcomes.add((moved, any(ok for _, ok in posts), all(ok for _, ok in posts)))
        # Refused only for the ask that landed; moved only with no ask open below.
        assert moved != asked, posts
        assert (general in await reaches(store, planner)) != moved
        account = await store.get_account(w.human, planner.account_id)
        assert account.parent_id == (ranger.account_id if moved else w.agent.account_id)
        assert (await state_of(w, planner) is PresenceState.WAITING) == asked
        # Every post that landed is there where it was posted, and no other.
        page = await store.list_messages(w.human, general, 200, "")
        mine = [m for m in page.items if m.author_id == planner.account_id]
        assert len(mine) == sum(1 for _, ok in posts if ok)
    # Both ways happened: moves that won with some posts in before and some refused after.
    assert (True, True, False) in outcomes and any(not moved for moved, *_ in outcomes), outcomes


# --- participation as the chain definition, on random trees ------------------------------


@st.composite
def forests(
    draw: st.DrawFn,
) -> tuple[list[int | None], list[set[int]], list[tuple[int, int | None]]]:
    """Parents of n agents (each under an earlier one, or a root), channels'
    members (agent indexes), and moves to try in order."""
    n = draw(st.integers(2, 7))
    parents: list[int | None] = [
        draw(st.none() | st.integers(0, i - 1)) if i else None for i in range(n)
    ]
    channels = draw(st.lists(st.sets(st.integers(0, n - 1), max_size=3), min_size=1, max_size=4))
    moves = draw(
        st.lists(st.tuples(st.integers(0, n - 1), st.none() | st.integers(0, n - 1)), max_size=4)
    )
    return parents, channels, moves


def chain_of(parents: list[int | None], i: int) -> list[int]:
    out = [i]
    while (p := parents[out[-1]]) is not None:
        out.append(p)
    return out


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=forests())
async def test_participation_is_the_chain_definition_on_random_trees(
    store: Store, case: tuple[list[int | None], list[set[int]], list[tuple[int, int | None]]]
) -> None:
    parents, members, moves = case
    w = await World.create(store)
    agents: list[Actor] = []
    for i, parent in enumerate(parents):
        if parent is None:
            agents.append(await w.add_account(f"r{i}", AccountKind.AGENT))
        else:
            agents.append(await w.add_subagent(f"s{i}", agents[parent]))
    channels: list[Channel] = [
        await store.create_channel(w.human, f"c{k}", "", [agents[i].account_id for i in sorted(m)])
        for k, m in enumerate(members)
    ]

    async def agree() -> None:
        for i, agent in enumerate(agents):
            chain = chain_of(parents, i)
            expected = {channels[k].channel_id for k, m in enumerate(members) if m & set(chain)}
            participation = await store.participation(agent)
            assert participation.chain == tuple(agents[j].account_id for j in chain)
            assert set(participation.channels) == expected
            assert await reaches(store, agent) == expected
            # The write gate says the same, on a channel drawn from each side.
            for k, channel in enumerate(channels):
                if k % len(agents) != i % len(channels):
                    continue
                try:
                    await store.append_message(agent, channel.channel_id, [TextBlock("probe")])
                    posted = True
                except NotFound:
                    posted = False
                assert posted == (channel.channel_id in expected)

    await agree()
    for agent_i, parent_i in moves:
        below = {j for j in range(len(parents)) if agent_i in chain_of(parents, j)}
        try:
            await w.reparent(agents[agent_i], agents[parent_i] if parent_i is not None else None)
        except FailedPrecondition:
            assert parent_i in below
            continue
        assert parent_i not in below
        parents[agent_i] = parent_i
        await agree()
