"""An answer racing a re-post on one item: both lock the item's row, so exactly
one wins, and an ask is never both answered and replaced."""

from __future__ import annotations

import asyncio
import collections

from compass_server.store.inbox import AnswerOutcome, InboxStore
from compass_server.store.types import Answer, InboxStatus
from tests.test_inbox_store import rows, yes_no
from tests.world import World

TRIALS = 200


async def test_an_answer_and_a_repost_race_with_exactly_one_winner(world: World) -> None:
    inbox = InboxStore(world.store.db, max_open_per_agent=TRIALS + 1)
    wins: collections.Counter[str] = collections.Counter()
    for trial in range(TRIALS):
        key = f"race-{trial}"
        item, _ = await inbox.post(world.agent, key, "t", "", yes_no())
        answer, (reposted, _) = await asyncio.gather(
            inbox.answer(
                world.human,
                item.item_id,
                [Answer("go", ("y",))],
                f"c{trial}",
                expected_revision=item.revision,
            ),
            inbox.post(world.agent, key, "", "", yes_no()),
        )
        (old,) = await rows(
            world,
            "SELECT ask_status, (SELECT count(*) FROM inbox_messages a"
            " WHERE a.answers_message_id = m.id) AS answers"
            " FROM inbox_messages m WHERE m.ask_id = %(ask)s",
            ask=item.ask_id,
        )
        if answer.outcome is AnswerOutcome.TAKEN:
            wins["answer"] += 1
            assert (old["ask_status"], old["answers"]) == ("answered", 1), trial
        else:
            wins["repost"] += 1
            assert answer.outcome is AnswerOutcome.NOT_OPEN, (trial, answer)
            assert (old["ask_status"], old["answers"]) == ("replaced", 0), trial
        # Whoever won, the re-post's ask is the one that waits now.
        assert reposted.status is InboxStatus.OPEN and reposted.revision == item.revision + 1
    never = await rows(
        world,
        "SELECT 1 FROM inbox_messages m JOIN inbox_messages a ON a.answers_message_id = m.id"
        " WHERE m.ask_status <> 'answered'",
    )
    assert never == []
    assert wins["answer"] + wins["repost"] == TRIALS
