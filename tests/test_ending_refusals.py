"""A refusal names the ending that happened, whatever the clock says now:
an ask withdrawn (or declined, or answered) before its deadline is refused
as that, not as expired, to an answer or decline that comes after it."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Coroutine
from typing import Any

import pytest

from compass.v1 import comms_pb2 as pb
from compass_server.store.errors import Conflict
from compass_server.store.types import Message
from tests.servers import CallError, Client
from tests.test_api_ask_endings import duration, post
from tests.test_api_comms import tok
from tests.test_deadline_cutoff import (  # noqa: F401  (fixtures, by name)
    GOOD,
    only_ask,
    past,
    post_due,
    quiet,
    quiet_url,
)
from tests.world import World

pytestmark = pytest.mark.timeout(120)


def _ask_id(message: Message) -> str:
    return only_ask(message).ask_id


@pytest.mark.parametrize(
    ("first", "late"),
    [
        (first, late)
        for first in ("withdraw", "owner", "decline", "answer")
        for late in ("answer", "decline", "withdraw")
        # A repeat withdraw succeeds, changing nothing.
        if (first, late) != ("withdraw", "withdraw")
    ],
)
async def test_after_the_deadline_a_refusal_names_the_ending_that_happened(
    quiet: World,  # noqa: F811
    first: str,
    late: str,
) -> None:
    w = quiet
    message = await post_due(w, 0.4)
    ask_id = _ask_id(message)
    if first == "withdraw":
        await w.store.cancel_ask(w.agent, ask_id)
        said = "withdrawn"
    elif first == "owner":
        await w.store.withdraw_ask(w.human, ask_id)
        said = "withdrawn by its agent's owner"
    elif first == "decline":
        await w.store.decline_ask(w.human, ask_id, "no")
        said = "declined"
    else:
        await w.store.answer_ask(w.human, ask_id, GOOD)
        said = "answered"
    await past(message)
    with pytest.raises(Conflict) as refused:
        if late == "answer":
            await w.store.answer_ask(w.human, ask_id, GOOD)
        elif late == "decline":
            await w.store.decline_ask(w.human, ask_id, "late")
        else:
            await w.store.cancel_ask(w.agent, ask_id)
    assert f"is already {said}" in str(refused.value), str(refused.value)
    assert "expired" not in str(refused.value)


_SAID = {
    "answered": "is already answered",
    "withdrawn_by_agent": "is already withdrawn",
    "withdrawn_by_owner": "is already withdrawn by its agent's owner",
    "declined": "is already declined",
    "expired": "is already expired",
}


async def test_racing_the_deadline_every_loser_is_told_the_ending_that_stands(
    quiet: World,  # noqa: F811
) -> None:
    await _race(quiet)


async def test_racing_the_deadline_and_the_sweep_every_loser_is_told_the_ending_that_stands(
    api_world: World,
) -> None:
    """The same with a server's expiry loop sweeping the database."""
    await _race(api_world)


async def _at(deadline: datetime.datetime, offset: float) -> None:
    now = datetime.datetime.now(datetime.UTC)
    await asyncio.sleep(max(0.0, (deadline - now).total_seconds() + offset))


async def _refused(late: Coroutine[Any, Any, None]) -> str | None:
    try:
        await late
    except Conflict as exc:
        return str(exc)
    return None


async def _withdraw_then_answer(
    w: World, deadline: datetime.datetime, ask_id: str, skew: float
) -> list[str | None]:
    async def withdraw() -> None:
        await _at(deadline, -skew)
        await w.store.cancel_ask(w.agent, ask_id)

    async def answer() -> None:
        await _at(deadline, skew)
        await w.store.answer_ask(w.human, ask_id, GOOD)

    return await asyncio.gather(_refused(withdraw()), _refused(answer()))


async def _race(w: World) -> None:
    told: list[tuple[str, str]] = []
    for i in range(40):
        ask = only_ask(await post_due(w, 0.3))
        assert ask.deadline is not None
        # The withdraw a moment before the deadline, the answer a moment after;
        # which lands first varies with the machine.
        refusals = await _withdraw_then_answer(w, ask.deadline, ask.ask_id, 0.002 * (i % 10))
        _, now = await w.store.get_ask(w.human, ask.ask_id)
        assert now.ending is not None
        told += [(now.ending.kind.value, said) for said in refusals if said is not None]
    wrong = [(kind, said) for kind, said in told if _SAID[kind] not in said]
    assert not wrong, wrong[:5]


async def test_over_the_api_a_late_answer_is_told_the_withdraw(
    client: Client, api_world: World
) -> None:
    w = api_world
    # A second before the deadline: room for a loaded machine to land it first.
    ask = await post(client, w, timeout=duration(4.0))
    deadline = ask.deadline.ToDatetime(datetime.UTC)
    await asyncio.sleep((deadline - datetime.datetime.now(datetime.UTC)).total_seconds() - 1.0)
    await client.call("WithdrawAsk", pb.WithdrawAskRequest(ask_id=ask.ask_id), tok(w, w.human))
    await asyncio.sleep((deadline - datetime.datetime.now(datetime.UTC)).total_seconds() + 0.2)
    with pytest.raises(CallError) as refused:
        await client.call(
            "RespondToAsk",
            pb.RespondToAskRequest(
                ask_id=ask.ask_id,
                answers=[pb.AskQuestionAnswer(question_id=q.question_id) for q in ask.questions],
            ),
            tok(w, w.human),
        )
    assert refused.value.code == "already_exists"
    assert "is already withdrawn by its agent's owner" in refused.value.message
