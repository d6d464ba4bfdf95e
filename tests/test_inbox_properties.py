"""Any sequence of posts, replies, answers, closes and take-backs on one item
keeps the inbox's invariants: at most one open ask, a revision that moves only
when the agent asks, and exactly one answering message per answered ask."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compass_server.store import Conflict, NotFound, PermissionDenied
from compass_server.store.inbox import AnswerOutcome, InboxStore
from compass_server.store.types import Answer, InboxStatus
from tests.test_inbox_store import rows, yes_no
from tests.world import World

OPS = (
    "post_ask",
    "post_text",
    "agent_reply",
    "member_reply",
    "answer",
    "answer_badly",
    "member_close",
    "agent_close",
    "take_back",
    "reopen",
)


@dataclass
class Model:
    """What the rules say the item should be after each step."""

    status: InboxStatus | None = None
    revision: int = 0
    closed_by_agent: bool = False


async def step(inbox: InboxStore, world: World, key: str, op: str, m: Model) -> None:
    agent, human = world.agent, world.human
    item_id = None
    if m.status is not None:
        (row,) = await rows(world, "SELECT id FROM inbox_items WHERE key = %(k)s", k=key)
        item_id = row["id"]
    if op == "post_ask":
        await inbox.post(agent, key, "t", "", yes_no())
        m.status, m.revision = InboxStatus.OPEN, m.revision + 1
    elif op == "post_text":
        await inbox.post(agent, key, "t", "just so you know")
        m.status = m.status or InboxStatus.NOTE
    elif op == "agent_reply":
        if m.status is None:
            try:
                await inbox.reply_as_agent(agent, key, "hm")
            except NotFound:
                return
            raise AssertionError("a reply under an unknown key found an item")
        await inbox.reply_as_agent(agent, key, "hm")
    elif item_id is None:
        return
    elif op == "member_reply":
        await inbox.reply(human, item_id, "ok")
    elif op in ("answer", "answer_badly"):
        good = op == "answer"
        answers = [Answer("go", ("y",))] if good else [Answer("go", ("y", "n"))]
        result = await inbox.answer(human, item_id, answers, uuid.uuid4().hex)
        if m.status is not InboxStatus.OPEN:
            assert result.outcome is AnswerOutcome.NOT_OPEN
        elif good:
            assert result.outcome is AnswerOutcome.TAKEN
            m.status = InboxStatus.ANSWERED
        else:
            assert result.outcome is AnswerOutcome.REFUSED
    elif op in ("member_close", "agent_close"):
        by_agent = op == "agent_close"
        try:
            if by_agent:
                _, changed = await inbox.close_as_agent(agent, key, "no longer needed")
            else:
                _, changed = await inbox.close(human, item_id)
        except Conflict:
            assert m.status in (InboxStatus.ANSWERED, InboxStatus.NOTE)
            return
        assert changed == (m.status is InboxStatus.OPEN)
        if changed:
            m.status, m.closed_by_agent = InboxStatus.CLOSED, by_agent
            m.revision += by_agent
    elif op == "take_back":
        try:
            await inbox.take_back_answer(human, item_id)
        except Conflict:
            assert m.status is not InboxStatus.ANSWERED
            return
        m.status = InboxStatus.OPEN
    elif op == "reopen":
        try:
            await inbox.reopen(human, item_id)
        except Conflict:
            assert m.status is not InboxStatus.CLOSED
            return
        except PermissionDenied:
            assert m.status is InboxStatus.CLOSED and m.closed_by_agent
            return
        assert m.status is InboxStatus.CLOSED and not m.closed_by_agent
        m.status = InboxStatus.OPEN


async def check_invariants(world: World, key: str, m: Model) -> None:
    items = await rows(
        world,
        "SELECT i.status, i.revision, am.ask_status FROM inbox_items i"
        " LEFT JOIN inbox_messages am ON am.id = i.ask_message_id WHERE i.key = %(k)s",
        k=key,
    )
    if m.status is None:
        assert items == []
        return
    (item,) = items
    assert (item["status"], item["revision"]) == (m.status.value, m.revision)
    assert (
        item["ask_status"]
        == {
            InboxStatus.OPEN: "open",
            InboxStatus.ANSWERED: "answered",
            InboxStatus.CLOSED: "withdrawn",
            InboxStatus.NOTE: None,
        }[m.status]
    )
    asks = await rows(
        world,
        "SELECT m.ask_status, (SELECT count(*) FROM inbox_messages a"
        " WHERE a.answers_message_id = m.id) AS answers"
        " FROM inbox_messages m JOIN inbox_items i ON i.id = m.item_id"
        " WHERE i.key = %(k)s AND m.ask_id IS NOT NULL",
        k=key,
    )
    assert sum(a["ask_status"] == "open" for a in asks) <= 1
    for a in asks:
        assert a["answers"] == (1 if a["ask_status"] == "answered" else 0), asks


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=st.lists(st.sampled_from(OPS), min_size=1, max_size=12))
async def test_any_sequence_keeps_the_inbox_invariants(world: World, ops: list[str]) -> None:
    inbox = InboxStore(world.store.db)
    key = f"k-{uuid.uuid4().hex[:8]}"
    model = Model()
    for op in ops:
        await step(inbox, world, key, op, model)
        await check_invariants(world, key, model)
