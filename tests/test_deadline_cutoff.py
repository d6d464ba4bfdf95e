"""A deadline is a cutoff decided under the row lock, not a sweep's hint.

An ending attempted at or after an ask's deadline (an answer, a decline, the
agent's or the owner's withdraw; alone or in a coalesced batch) ends the ask
as expired instead, and its caller hears `already_exists` naming the expiry.
Every read shows an ask past its deadline as expired at once, whether or not
a sweep ran; and every server process wakes for the nearest deadline posted
through any of them."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import psycopg
import pytest

from compass.v1 import comms_pb2 as pb
from compass_server.store import Conflict, Database, Store
from compass_server.store.blocks import DeadlineBounds
from compass_server.store.types import (
    Answer,
    Ask,
    AskChange,
    EndingKind,
    EventKind,
    Message,
    PresenceState,
    Surface,
)
from tests.conftest import migrated_database
from tests.procs import ServerProcess
from tests.servers import CallError, GrpcClient
from tests.test_ask_expiry import fresh_database_url, open_world  # noqa: F401
from tests.test_ask_expiry import post_through as post_ask_through
from tests.test_coalesced_writes import lock_message, queued_behind
from tests.world import World, two_question_ask

pytestmark = pytest.mark.timeout(120)

GOOD = [Answer("db", ("pg",)), Answer("langs", ("py",))]
SHORT = DeadlineBounds(datetime.timedelta(milliseconds=1), datetime.timedelta(days=30))


@pytest.fixture(scope="module")
async def quiet_url(pg_admin_url: str) -> AsyncIterator[str]:
    """A database no server process sweeps."""
    async with migrated_database(pg_admin_url) as url:
        yield url


@pytest.fixture
async def quiet(quiet_url: str) -> AsyncIterator[World]:
    db = Database(quiet_url, min_size=1, max_size=8)
    await db.open()
    try:
        yield await World.create(Store(db, deadline_bounds=SHORT))
    finally:
        await db.close()


def only_ask(message: Message) -> Ask:
    (ask,) = [b for b in message.blocks if isinstance(b, Ask)]
    return ask


async def post_due(w: World, seconds: float = 0.2) -> Message:
    ask = dataclasses.replace(two_question_ask(), timeout=datetime.timedelta(seconds=seconds))
    return await w.store.append_message(w.agent, w.channel.channel_id, [ask])


async def past(*messages: Message) -> None:
    """Sleeps until every ask of these messages is past its deadline."""
    latest = max(only_ask(m).deadline for m in messages)  # type: ignore[type-var]
    assert latest is not None
    await asyncio.sleep(max(0.0, (latest - _now()).total_seconds()) + 0.02)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


async def stored_ask(url: str, message_id: uuid.UUID) -> dict[str, Any]:
    """The ask as its row holds it, read past every policy."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "SELECT b -> 'ask' FROM messages m, jsonb_array_elements(m.blocks) b "
            "WHERE m.id = %s AND b ->> 'kind' = 'ask'",
            (message_id,),
        )
        row = await cur.fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


async def recorded(url: str, ask_id: str) -> list[str]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "SELECT kind FROM ask_history WHERE ask_id = %s ORDER BY id", (ask_id,)
        )
        return [r[0] for r in await cur.fetchall()]


async def updates_of(w: World, message_id: uuid.UUID, mark: int) -> list[Ask]:
    """The ask as each MessageUpdated of its message since `mark` carried it."""
    events = await w.store.read_events(w.human, mark, 1000)
    return [
        only_ask(e.message)
        for e in events
        if e.kind is EventKind.MESSAGE_UPDATED
        and e.message is not None
        and e.message.message_id == message_id
    ]


async def expired_by_the_server(url: str, w: World, message: Message, mark: int) -> None:
    """The row says expired, at the deadline, by no one; the record has one
    ending; the agent was told once; no answer message exists."""
    ask = only_ask(message)
    stored = await stored_ask(url, message.message_id)
    assert stored["ending"]["kind"] == "expired", stored
    assert "actor_id" not in stored["ending"]
    assert datetime.datetime.fromisoformat(stored["ending"]["at"]) == ask.deadline
    assert all(q.get("timed_out") for q in stored["questions"])
    assert not stored.get("answered") and not stored.get("cancelled")
    assert await recorded(url, ask.ask_id) == ["posted", "expired"]
    told = await updates_of(w, message.message_id, mark)
    assert [a.ending.kind for a in told if a.ending] == [EndingKind.EXPIRED]
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM messages WHERE blocks @> %s::jsonb",
            (f'[{{"kind": "ask_answer", "ask_answer": {{"ask_id": "{ask.ask_id}"}}}}]',),
        )
        assert await cur.fetchone() == (0,)
        cur = await conn.execute("SELECT due_at FROM asks WHERE ask_id = %s", (ask.ask_id,))
        assert await cur.fetchone() == (None,)


def endings(w: World) -> dict[str, Callable[[str], Awaitable[Any]]]:
    return {
        "answer": lambda a: w.store.answer_ask(w.human, a, GOOD),
        "decline": lambda a: w.store.decline_ask(w.other_human, a, "too late"),
        "agent's withdraw": lambda a: w.store.cancel_ask(w.agent, a),
        "owner's withdraw": lambda a: w.store.withdraw_ask(w.human, a),
    }


async def test_an_ending_after_the_deadline_expires_the_ask_instead(
    quiet: World, quiet_url: str
) -> None:
    w = quiet
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    for name, end in endings(w).items():
        message = await post_due(w)
        mark = await w.store.last_event_id(w.human)
        await past(message)
        # No sweep runs here: the row is still open when the ending comes.
        assert "ending" not in await stored_ask(quiet_url, message.message_id)
        with pytest.raises(Conflict) as refused:
            await end(only_ask(message).ask_id)
        assert "expired" in refused.value.message, (name, refused.value.message)
        await expired_by_the_server(quiet_url, w, message, mark)
        # The next attempt finds it expired; nothing more is written.
        with pytest.raises(Conflict, match="expired"):
            await end(only_ask(message).ask_id)
        assert len(await updates_of(w, message.message_id, mark)) == 1
    (presence,) = await w.store.get_presence(w.human, [w.agent.account_id])
    assert presence.state is not PresenceState.WAITING


async def test_coalesced_endings_after_the_deadline_expire_their_asks(
    quiet: World, quiet_url: str
) -> None:
    w = quiet
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    held = await post_due(w, 3600)
    due = [await post_due(w) for _ in endings(w)]
    mark = await w.store.last_event_id(w.human)
    await past(*due)
    writes = [
        (lambda end=end, m=m: end(only_ask(m).ask_id))
        for end, m in zip(endings(w).values(), due, strict=True)
    ]
    first, results = await queued_behind(
        w.store._endings,
        lambda: w.store.answer_ask(w.human, only_ask(held).ask_id, GOOD),
        writes,
        lock_message(quiet_url, held),
    )
    # The ask before its deadline is answered; those past it expire instead.
    assert first[0].blocks[0].ending.kind is EndingKind.ANSWERED
    for result, message in zip(results, due, strict=True):
        assert isinstance(result, Conflict) and "expired" in result.message, result
        await expired_by_the_server(quiet_url, w, message, mark)


async def test_every_read_shows_an_ask_past_its_deadline_expired_before_any_sweep(
    quiet: World, quiet_url: str
) -> None:
    w = quiet
    message = await post_due(w, 0.3)
    ask_id = only_ask(message).ask_id
    assert (await w.store.get_message(w.human, message.message_id)).blocks[0].is_open  # type: ignore[union-attr]
    assert (await w.store.ask_history(w.human, ask_id)).may_answer
    await past(message)

    def expired(ask: Ask) -> None:
        assert ask.ending is not None and ask.ending.kind is EndingKind.EXPIRED
        assert ask.ending.at == only_ask(message).deadline and ask.ending.actor_id is None
        assert ask.ending.surface is Surface.SERVER
        assert all(q.timed_out for q in ask.questions) and not ask.is_open

    expired(only_ask(await w.store.get_message(w.human, message.message_id)))
    expired((await w.store.get_ask(w.human, ask_id))[1])
    page = await w.store.list_messages(w.human, w.channel.channel_id, 10, "")
    expired(only_ask(next(m for m in page.items if m.message_id == message.message_id)))
    found = await w.store.search_messages(w.human, "database", None, 10, "")
    expired(only_ask(next(m for m in found.items if m.message_id == message.message_id)))
    record = await w.store.ask_history(w.human, ask_id)
    assert not record.may_answer and not record.may_withdraw
    assert [e.change for e in record.entries] == [AskChange.POSTED, AskChange.EXPIRED]
    # Read, not written: the row itself is still open.
    assert "ending" not in await stored_ask(quiet_url, message.message_id)

    # The sweep writes what the reads showed: a reader can't tell it ran.
    shown = only_ask(await w.store.get_message(w.human, message.message_id))
    assert await w.store.expire_due_asks() == 1
    assert "ending" in await stored_ask(quiet_url, message.message_id)
    assert only_ask(await w.store.get_message(w.human, message.message_id)) == shown
    assert (await w.store.ask_history(w.human, ask_id)).entries == record.entries


# --- two server processes ---------------------------------------------------------------


async def post_through(client: GrpcClient, w: World, seconds: float) -> tuple[str, uuid.UUID]:
    ask_id = await post_ask_through(client, w, seconds)
    return ask_id, (await w.store.get_ask(w.human, ask_id))[0].message_id


async def test_with_the_posting_server_down_another_refuses_an_answer_after_the_deadline(
    fresh_database_url: str,  # noqa: F811
) -> None:
    url = fresh_database_url
    db, w = await open_world(url)
    env = {"COMPASS_ASK_DEADLINE_MIN_SECONDS": "0.1", "COMPASS_EXPIRY_INTERVAL_SECONDS": "60"}
    a = ServerProcess(url, env=env).start()
    b = ServerProcess(url, env=env).start()
    other = GrpcClient(b.grpc_port)
    human = w.tokens[w.human.account_id]
    try:
        poster = GrpcClient(a.grpc_port)
        mark = await w.store.last_event_id(w.human)
        # Deadlines posted through a, which dies at once: b wakes for them
        # (its own interval is a minute).
        orphan, orphan_message = await post_through(poster, w, 0.8)
        held, held_message = await post_through(poster, w, 0.8)
        await poster.close()
        a.kill9()

        # One ask's row is locked past its deadline, so no sweep can end it.
        lock = await psycopg.AsyncConnection.connect(url)
        await lock.execute("SELECT 1 FROM messages WHERE id = %s FOR UPDATE", (held_message,))
        deadline = (await w.store.get_ask(w.human, held))[1].deadline
        assert deadline is not None
        await asyncio.sleep((deadline - _now()).total_seconds() + 0.5)

        # b expired the other at its deadline (its own interval is a minute),
        # though it never heard of it from a post of its own.
        for _ in range(50):
            if "ending" in await stored_ask(url, orphan_message):
                break
            await asyncio.sleep(0.1)
        assert (await stored_ask(url, orphan_message))["ending"]["kind"] == "expired"
        # Every read through b shows the held one expired and not answerable ...
        got = await other.call(
            "GetMessage", pb.GetMessageRequest(message_id=str(held_message)), human
        )
        assert got.message.blocks[0].ask.ending.kind == pb.ASK_ENDING_KIND_EXPIRED
        record = await other.call("GetAskHistory", pb.GetAskHistoryRequest(ask_id=held), human)
        assert not record.caller_may_answer
        # ... while its row is still open.
        assert "ending" not in await stored_ask(url, held_message)

        # An answer through b waits for the row, then finds its deadline passed.
        answering = asyncio.ensure_future(
            other.call(
                "RespondToAsk",
                pb.RespondToAskRequest(
                    ask_id=held,
                    answers=[pb.AskQuestionAnswer(question_id="q", chosen_option_ids=["y"])],
                ),
                human,
            )
        )
        await asyncio.sleep(0.3)
        assert not answering.done()
        await lock.rollback()
        await lock.close()
        with pytest.raises(CallError) as refused:
            await answering
        assert refused.value.code == "already_exists" and "expired" in refused.value.message

        for ask_id, message_id in ((orphan, orphan_message), (held, held_message)):
            stored = await stored_ask(url, message_id)
            assert stored["ending"]["kind"] == "expired"
            assert await recorded(url, ask_id) == ["posted", "expired"]
            told = await updates_of(w, message_id, mark)
            assert [t.ending.kind for t in told if t.ending] == [EndingKind.EXPIRED]
        (presence,) = await w.store.get_presence(w.human, [w.agent.account_id])
        assert presence.state is not PresenceState.WAITING
    finally:
        await other.close()
        a.stop()
        assert b.stop() == 0
        await db.close()
    assert not [line for line in b.log if "expiring asks failed" in line], b.log
