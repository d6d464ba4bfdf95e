"""An ask's follow-up steps as its agent reads them: compass-mcp's check_ask
says whom it reminded and whom it escalated to, and when, in words and in
its structured content."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import pathlib
from typing import Any

from compass_server.store.types import Ask, FollowUp
from tests.test_mcp_server import mcp_for, text_of
from tests.world import World, two_question_ask

S = datetime.timedelta(seconds=1)


async def test_check_ask_shows_the_reminders_and_the_escalation(
    server: Any, api_world: World, tmp_path: pathlib.Path
) -> None:
    w = api_world
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    ask = dataclasses.replace(
        two_question_ask(),
        answerer_ids=(w.human.account_id,),
        follow_up=FollowUp(
            remind_after=0.3 * S,
            remind_times=1,
            escalate_after=0.6 * S,
            escalate_to=(w.other_human.account_id,),
        ),
    )
    posted = await w.post_ask(w.agent, ask)
    block = posted.blocks[0]
    assert isinstance(block, Ask)
    give_up = asyncio.get_running_loop().time() + 20
    while len((await w.store._ask_state(w.human, block.ask_id)).follow_up_steps) < 2:
        assert asyncio.get_running_loop().time() < give_up
        await asyncio.sleep(0.05)
    async with mcp_for(server, w, tmp_path) as m:
        read = await m.call("check_ask", {"ask_id": block.ask_id})
    said = text_of(read)
    assert said.startswith(f"Ask {block.ask_id} is open")
    assert f"Follow-ups: reminded {w.human.account_id} at " in said
    assert f"; escalated to {w.other_human.account_id} at " in said and "(urgent)" in said
    steps = read.structured_content["follow_up_steps"]  # type: ignore[index]
    assert [s["kind"] for s in steps] == ["reminded", "escalated"]
    assert steps[1]["account_ids"] == [str(w.other_human.account_id)] and steps[1]["urgent"]
