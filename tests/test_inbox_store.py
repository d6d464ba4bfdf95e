"""The rules of an agent's inbox, in the store, against a real PostgreSQL:
one test per rule."""

from __future__ import annotations

import asyncio
import collections
import uuid
from typing import Any

import pytest

from compass_server.inbox.pictures import MAX_PICTURE_BYTES, MAX_PICTURES, Picture
from compass_server.store import Conflict, InvalidArgument, NotFound, PermissionDenied
from compass_server.store.errors import ResourceExhausted
from compass_server.store.inbox import AnswerOutcome, InboxStore
from compass_server.store.types import (
    Answer,
    Ask,
    AskAnswerBlock,
    AskOption,
    AskQuestion,
    AskStatus,
    EndingKind,
    Event,
    EventKind,
    InboxStatus,
    PresenceState,
    TextBlock,
)
from tests.world import World, two_question_ask

GOOD = [Answer("db", ("pg",)), Answer("langs", ("py", "go"), "and Rust")]
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24
GIF = b"GIF89a" + b"\x01" * 10
JPEG = b"\xff\xd8\xff\xe0" + b"\x02" * 10
WEBP = b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"\x03" * 8


def yes_no(question_id: str = "go") -> Ask:
    return Ask(
        questions=(
            AskQuestion(
                question_id, "Ship it?", options=(AskOption("y", "Yes"), AskOption("n", "No"))
            ),
        )
    )


@pytest.fixture
def inbox(world: World) -> InboxStore:
    return InboxStore(world.store.db)


async def rows(world: World, sql: str, **params: Any) -> list[dict[str, Any]]:
    """Re-reads rows as the application does: scoped to the world's workspace."""
    async with world.store.db.tx(world.human) as conn:
        cur = await conn.execute(sql.encode(), params)
        return await cur.fetchall()


async def asks_of(world: World, item_id: uuid.UUID) -> list[tuple[str, str]]:
    found = await rows(
        world,
        "SELECT ask_id, ask_status FROM inbox_messages"
        " WHERE item_id = %(i)s AND ask_id IS NOT NULL ORDER BY position",
        i=item_id,
    )
    return [(r["ask_id"], r["ask_status"]) for r in found]


async def events_since(world: World, after: int) -> list[Event]:
    return await world.store.read_events(world.human, after, 100)


# --- posts ----------------------------------------------------------------------


async def test_a_post_with_an_ask_appends_and_replaces_the_open_ask(
    world: World, inbox: InboxStore
) -> None:
    item, first = await inbox.post(world.agent, "deploy", "Deploy?", "Shall I?", two_question_ask())
    assert item.status is InboxStatus.OPEN and item.revision == 1
    assert first.ask is not None and item.ask_id == first.ask.ask_id
    item2, second = await inbox.post(world.agent, "deploy", "", "Changed my mind", yes_no())
    assert second.ask is not None and item2.item_id == item.item_id
    assert item2.ask_id == second.ask.ask_id and item2.revision == 2
    assert item2.title == "Deploy?"  # an empty title keeps the one it had
    assert await asks_of(world, item.item_id) == [
        (first.ask.ask_id, "replaced"),
        (second.ask.ask_id, "open"),
    ]
    # Only the standing moved: the replaced ask's content is as posted.
    thread = await inbox.read_thread(world.human, item.item_id)
    old = thread.messages[0]
    assert old.ask_status is AskStatus.REPLACED
    assert old.ask is not None and old.ask.questions == two_question_ask().questions
    assert old.ask.cancelled and not old.ask.answered
    assert old.blocks[0] == TextBlock("Shall I?")


async def test_a_post_drops_server_owned_ask_state_and_checks_the_ask(
    world: World, inbox: InboxStore
) -> None:
    forged = Ask(
        questions=(AskQuestion("q", "Q?", chosen_option_ids=("x",), custom_text="t"),),
        ask_id="ask_mine",
        answered=True,
    )
    _, message = await inbox.post(world.agent, "k", "t", "", forged)
    assert message.ask is not None
    assert message.ask.ask_id.startswith("ask_") and message.ask.ask_id != "ask_mine"
    assert message.ask.questions == (AskQuestion("q", "Q?"),)
    with pytest.raises(InvalidArgument, match="no questions"):
        await inbox.post(world.agent, "k2", "t", "", Ask(questions=()))
    with pytest.raises(InvalidArgument, match="repeats question_id"):
        await inbox.post(
            world.agent,
            "k2",
            "t",
            "",
            Ask(questions=(AskQuestion("a", "?"), AskQuestion("a", "?"))),
        )
    assert await rows(world, "SELECT 1 FROM inbox_items WHERE key = 'k2'") == []


async def test_a_post_with_no_ask_under_a_new_key_is_a_settled_note(
    world: World, inbox: InboxStore
) -> None:
    bounded = InboxStore(world.store.db, max_open_per_agent=1)
    note, message = await bounded.post(world.agent, "fyi", "FYI", "Build is green")
    assert note.status is InboxStatus.NOTE and note.revision == 0
    assert note.settled_at is not None and note.ask_id == ""
    assert message.ask is None and message.blocks == (TextBlock("Build is green"),)
    await bounded.post(world.agent, "fyi-2", "FYI", "Tests are green")
    # Notes count against nothing: the one open place is still free.
    opened, _ = await bounded.post(world.agent, "q", "Q", "", yes_no())
    assert opened.status is InboxStatus.OPEN
    open_items = await inbox.list_items(world.human, [InboxStatus.OPEN])
    assert [i.key for i in open_items.items] == ["q"]
    with pytest.raises(Conflict, match="note"):
        await inbox.close(world.human, note.item_id)
    result = await inbox.answer(world.human, note.item_id, GOOD, "k1")
    assert result.outcome is AnswerOutcome.NOT_OPEN and "note" in result.reason


async def test_a_post_with_no_ask_follows_up_an_existing_thread(
    world: World, inbox: InboxStore
) -> None:
    item, asked = await inbox.post(world.agent, "k", "t", "Which one?", two_question_ask())
    followed, follow = await inbox.post(world.agent, "k", "", "Take your time")
    assert followed.item_id == item.item_id and follow.ask is None
    assert followed.status is InboxStatus.OPEN and followed.revision == item.revision
    assert followed.ask_id == item.ask_id and followed.updated_at > item.updated_at
    assert await asks_of(world, item.item_id) == [(item.ask_id, "open")]
    thread = await inbox.read_thread(world.human, item.item_id)
    assert [m.message_id for m in thread.messages] == [asked.message_id, follow.message_id]


async def test_the_revision_moves_only_when_the_agent_asks(world: World, inbox: InboxStore) -> None:
    seen: list[int] = []

    def at(item: Any) -> None:
        seen.append(item.revision)

    item, _ = await inbox.post(world.agent, "k", "t", "", two_question_ask())
    at(item)
    at((await inbox.reply_as_agent(world.agent, "k", "still there?"))[0])
    at((await inbox.reply(world.human, item.item_id, "looking"))[0])
    at((await inbox.post(world.agent, "k", "", "no ask here"))[0])
    at((await inbox.answer(world.human, item.item_id, GOOD, "a1")).item)
    at(await inbox.take_back_answer(world.human, item.item_id))
    at((await inbox.close(world.human, item.item_id))[0])
    at(await inbox.reopen(world.human, item.item_id))
    at((await inbox.post(world.agent, "k", "", "", yes_no()))[0])
    at((await inbox.close_as_agent(world.agent, "k", "not needed"))[0])
    assert seen == [1, 1, 1, 1, 1, 1, 1, 1, 2, 3]


async def test_an_over_long_key_title_or_empty_post_is_refused(
    world: World, inbox: InboxStore
) -> None:
    with pytest.raises(InvalidArgument, match="key"):
        await inbox.post(world.agent, "", "t", "body")
    with pytest.raises(InvalidArgument, match="key"):
        await inbox.post(world.agent, "k" * 201, "t", "body")
    with pytest.raises(InvalidArgument, match="title"):
        await inbox.post(world.agent, "k", "t" * 201, "body")
    with pytest.raises(InvalidArgument, match="body, an ask"):
        await inbox.post(world.agent, "k", "t", "")
    with pytest.raises(PermissionDenied):
        await inbox.post(world.human, "k", "t", "body")


# --- answers --------------------------------------------------------------------


async def test_an_answer_is_taken_repeated_refused_or_not_open(
    world: World, inbox: InboxStore
) -> None:
    item, asked = await inbox.post(world.agent, "k", "t", "", two_question_ask())
    start = await world.store.last_event_id(world.human)
    refused = await inbox.answer(world.human, item.item_id, [GOOD[0]], "c1")
    assert refused.outcome is AnswerOutcome.REFUSED and "missing" in refused.reason
    assert refused.message is None
    assert (await inbox.read_thread(world.human, item.item_id)).total == 1
    assert await events_since(world, start) == []

    taken = await inbox.answer(
        world.human, item.item_id, GOOD, "c1", text="go ahead", files=[Picture("shot.png", PNG)]
    )
    assert taken.outcome is AnswerOutcome.TAKEN and taken.message is not None
    assert taken.item.status is InboxStatus.ANSWERED and taken.item.revision == item.revision
    assert taken.item.answered_by == world.human.account_id and taken.item.settled_at
    text, snapshot = taken.message.blocks
    assert text == TextBlock("go ahead")
    assert isinstance(snapshot, AskAnswerBlock) and snapshot.ask_id == item.ask_id
    assert snapshot.ask_message_id == asked.message_id
    assert [q.chosen_option_ids for q in snapshot.questions] == [("pg",), ("py", "go")]
    assert [a.content_type for a in taken.message.attachments] == ["image/png"]

    repeated = await inbox.answer(world.human, item.item_id, [GOOD[0]], "c1")
    assert repeated.outcome is AnswerOutcome.REPEATED
    assert repeated.message is not None
    assert repeated.message.message_id == taken.message.message_id
    again = await inbox.answer(world.human, item.item_id, GOOD, "c2")
    assert again.outcome is AnswerOutcome.NOT_OPEN and "answered" in again.reason
    thread = await inbox.read_thread(world.human, item.item_id)
    assert thread.total == 2
    assert thread.messages[0].ask_status is AskStatus.ANSWERED
    answers = await rows(
        world, "SELECT count(*) AS n FROM inbox_messages WHERE answers_message_id IS NOT NULL"
    )
    assert answers[0]["n"] == 1


async def test_a_replaced_withdrawn_or_stale_ask_is_not_open(
    world: World, inbox: InboxStore
) -> None:
    item, _ = await inbox.post(world.agent, "k", "t", "", two_question_ask())
    old_ask, old_revision = item.ask_id, item.revision
    item, _ = await inbox.post(world.agent, "k", "", "", two_question_ask())
    by_ask = await inbox.answer(world.human, item.item_id, GOOD, "c1", ask_id=old_ask)
    assert by_ask.outcome is AnswerOutcome.NOT_OPEN and "replaced" in by_ask.reason
    stale = await inbox.answer(
        world.human, item.item_id, GOOD, "c2", expected_revision=old_revision
    )
    assert stale.outcome is AnswerOutcome.NOT_OPEN and "revision" in stale.reason
    await inbox.close_as_agent(world.agent, "k", "done without you")
    withdrawn = await inbox.answer(world.human, item.item_id, GOOD, "c3")
    assert withdrawn.outcome is AnswerOutcome.NOT_OPEN and "withdrawn" in withdrawn.reason
    assert await asks_of(world, item.item_id) == [
        (old_ask, "replaced"),
        (item.ask_id, "withdrawn"),
    ]
    assert (await inbox.read_thread(world.human, item.item_id)).total == 2


async def test_an_answer_under_a_key_another_message_holds_is_not_taken(
    world: World, inbox: InboxStore
) -> None:
    item, _ = await inbox.post(world.agent, "k", "t", "", two_question_ask())
    first = await inbox.answer(world.human, item.item_id, GOOD, "same-key")
    item, _ = await inbox.post(world.agent, "k", "", "", two_question_ask())
    second = await inbox.answer(world.human, item.item_id, GOOD, "same-key")
    assert second.outcome is AnswerOutcome.REPEATED
    assert second.message is not None and first.message is not None
    assert second.message.message_id == first.message.message_id
    assert second.item.status is InboxStatus.OPEN
    assert (await asks_of(world, item.item_id))[-1] == (item.ask_id, "open")


async def test_taking_an_answer_back_deletes_it_and_its_files_and_reopens_the_ask(
    world: World, inbox: InboxStore
) -> None:
    item, _ = await inbox.post(world.agent, "k", "t", "", two_question_ask())
    taken = await inbox.answer(world.human, item.item_id, GOOD, "c1", files=[Picture("a", GIF)])
    assert taken.message is not None
    (picture,) = taken.message.attachments
    await inbox.grant(world.human, world.agent.account_id, world.other_human.account_id)
    with pytest.raises(PermissionDenied):
        await inbox.take_back_answer(world.other_human, item.item_id)
    back = await inbox.take_back_answer(world.human, item.item_id)
    assert back.status is InboxStatus.OPEN and back.revision == item.revision
    assert back.ask_id == item.ask_id and back.answered_by is None and back.settled_at is None
    thread = await inbox.read_thread(world.human, item.item_id)
    assert thread.total == 1 and thread.messages[0].ask_status is AskStatus.OPEN
    with pytest.raises(NotFound):
        await inbox.get_attachment(world.human, item.item_id, picture.attachment_id)
    assert (
        await rows(world, "SELECT 1 FROM inbox_files WHERE item_id = %(i)s", i=item.item_id) == []
    )
    with pytest.raises(Conflict, match="no answer"):
        await inbox.take_back_answer(world.human, item.item_id)
    # The key is free again, and the ask takes an answer once more.
    again = await inbox.answer(world.human, item.item_id, GOOD, "c1")
    assert again.outcome is AnswerOutcome.TAKEN


# --- closes ---------------------------------------------------------------------


async def test_a_member_close_withdraws_without_a_reason_and_taking_it_back_reopens(
    world: World, inbox: InboxStore
) -> None:
    item, _ = await inbox.post(world.agent, "k", "t", "", two_question_ask())
    start = await world.store.last_event_id(world.human)
    closed, changed = await inbox.close(world.human, item.item_id)
    assert changed and closed.status is InboxStatus.CLOSED
    assert closed.revision == item.revision and closed.close_reason == ""
    assert closed.closed_by == world.human.account_id
    thread = await inbox.read_thread(world.human, item.item_id)
    assert thread.total == 1  # no message for a member's close
    assert thread.messages[0].ask_status is AskStatus.WITHDRAWN
    assert thread.messages[0].withdrawn_reason == ""
    event, settled = await events_since(world, start)
    # The change carries the withdrawn ask's message, whose ending names the member.
    assert event.inbox is not None and event.inbox.message is not None
    ask = event.inbox.message.ask
    assert event.inbox.message.message_id == thread.messages[0].message_id
    assert ask is not None and ask.cancelled and ask.ending is not None
    assert ask.ending.kind is EndingKind.WITHDRAWN_BY_PERSON
    assert ask.ending.actor_id == world.human.account_id and ask.ending.reason == ""
    assert settled.presence is not None and settled.presence.state is PresenceState.OFFLINE
    again, changed = await inbox.close(world.human, item.item_id)
    assert not changed and again == closed
    assert len(await events_since(world, start)) == 2

    await inbox.grant(world.human, world.agent.account_id, world.other_human.account_id)
    with pytest.raises(PermissionDenied):
        await inbox.reopen(world.other_human, item.item_id)
    reopened = await inbox.reopen(world.human, item.item_id)
    assert reopened.status is InboxStatus.OPEN and reopened.closed_by is None
    assert reopened.ask_id == item.ask_id and reopened.revision == item.revision
    assert await asks_of(world, item.item_id) == [(item.ask_id, "open")]


async def test_an_agents_close_keeps_its_reason_and_moves_the_revision(
    world: World, inbox: InboxStore
) -> None:
    item, _ = await inbox.post(world.agent, "k", "t", "", two_question_ask())
    with pytest.raises(InvalidArgument, match="reason"):
        await inbox.close_as_agent(world.agent, "k", " ")
    closed, changed = await inbox.close_as_agent(world.agent, "k", "found it myself")
    assert changed and closed.status is InboxStatus.CLOSED
    assert closed.revision == item.revision + 1 and closed.close_reason == "found it myself"
    assert closed.closed_by == world.agent.account_id
    thread = await inbox.read_thread(world.human, item.item_id)
    assert thread.messages[0].withdrawn_reason == "found it myself"
    again, changed = await inbox.close_as_agent(world.agent, "k", "again")
    assert not changed and again.revision == closed.revision
    # The agent's close stands: a person can't take it back.
    with pytest.raises(PermissionDenied):
        await inbox.reopen(world.human, item.item_id)
    with pytest.raises(NotFound):
        await inbox.close_as_agent(world.agent, "nope", "why")
    answered, _ = await inbox.post(world.agent, "a", "t", "", yes_no())
    await inbox.answer(world.human, answered.item_id, [Answer("go", ("y",))], "c")
    with pytest.raises(Conflict, match="answered"):
        await inbox.close_as_agent(world.agent, "a", "too late")


# --- replies and reads ------------------------------------------------------------


async def test_replies_by_a_member_and_by_the_agent_append_without_an_ask(
    world: World, inbox: InboxStore
) -> None:
    item, _ = await inbox.post(world.agent, "k", "t", "", two_question_ask())
    _, mine = await inbox.reply(world.human, item.item_id, "which region?")
    _, theirs = await inbox.reply_as_agent(world.agent, "k", "eu-west")
    assert mine.ask is None and mine.author_id == world.human.account_id
    assert theirs.ask is None and theirs.author_id == world.agent.account_id
    with pytest.raises(InvalidArgument):
        await inbox.reply(world.human, item.item_id, "")
    thread = await inbox.read_thread(world.human, item.item_id)
    assert [m.author_handle for m in thread.messages] == ["scout", "ada", "scout"]
    assert thread.item.status is InboxStatus.OPEN


async def test_a_cut_thread_keeps_its_first_message_and_its_open_ask_message(
    world: World, inbox: InboxStore
) -> None:
    item, first = await inbox.post(world.agent, "k", "t", "Starting out")
    _, asked = await inbox.post(world.agent, "k", "", "Pick one", two_question_ask())
    for i in range(6):
        await inbox.reply_as_agent(world.agent, "k", f"update {i}")
    thread = await inbox.read_thread(world.human, item.item_id, limit=2)
    texts = [m.blocks[0] for m in thread.messages]
    assert [m.message_id for m in thread.messages][:2] == [first.message_id, asked.message_id]
    assert texts[2:] == [TextBlock("update 4"), TextBlock("update 5")]
    assert thread.total == 8
    whole = await inbox.read_thread(world.human, item.item_id, limit=200)
    assert len(whole.messages) == 8


# --- pictures ---------------------------------------------------------------------


async def test_pictures_are_files_of_their_message_sniffed_and_kept_across_reposts(
    world: World, inbox: InboxStore
) -> None:
    pictures = [
        Picture("chart.jpg", PNG),
        Picture("a.gif", GIF),
        Picture("", JPEG),
        Picture("w", WEBP),
    ]
    item, message = await inbox.post(
        world.agent, "k", "t", "See charts", two_question_ask(), pictures
    )
    # The bytes decide the type, whatever the name says.
    assert [(a.name, a.content_type) for a in message.attachments] == [
        ("chart.jpg", "image/png"),
        ("a.gif", "image/gif"),
        ("picture-3", "image/jpeg"),
        ("w", "image/webp"),
    ]
    await inbox.post(world.agent, "k", "", "Newer", two_question_ask(), [Picture("b.png", PNG)])
    for attachment, sent in zip(message.attachments, pictures, strict=True):
        got, data = await inbox.get_attachment(world.human, item.item_id, attachment.attachment_id)
        assert got == attachment and data == sent.data
    thread = await inbox.read_thread(world.human, item.item_id)
    assert [len(m.attachments) for m in thread.messages] == [4, 1]
    with pytest.raises(NotFound):
        await inbox.get_attachment(world.human, uuid.uuid4(), message.attachments[0].attachment_id)


@pytest.mark.parametrize(
    ("pictures", "error", "needle"),
    [
        ([Picture("x.png", b"not an image at all")], InvalidArgument, "not a PNG"),
        ([Picture("x.png", b"")], InvalidArgument, "not a PNG"),
        ([Picture("big.png", PNG + b"\x00" * MAX_PICTURE_BYTES)], ResourceExhausted, "limit"),
        ([Picture(f"{i}.png", PNG) for i in range(MAX_PICTURES + 1)], ResourceExhausted, "at most"),
        ([Picture("../etc/passwd", PNG)], InvalidArgument, "file name"),
    ],
    ids=["not-image", "empty", "too-big", "too-many", "path-name"],
)
async def test_a_picture_that_breaks_a_rule_is_refused_and_nothing_is_written(
    world: World, inbox: InboxStore, pictures: list[Picture], error: type[Exception], needle: str
) -> None:
    with pytest.raises(error, match=needle):
        await inbox.post(world.agent, "k", "t", "look", None, pictures)
    assert await rows(world, "SELECT 1 FROM inbox_items") == []


# --- who sees what ----------------------------------------------------------------


async def test_a_person_sees_only_items_of_agents_they_own_or_are_granted(
    world: World, inbox: InboxStore
) -> None:
    item, _ = await inbox.post(world.agent, "k", "t", "", two_question_ask())
    grace = world.other_human
    assert (await inbox.list_items(grace)).items == []
    with pytest.raises(NotFound):
        await inbox.read_thread(grace, item.item_id)
    result = None
    with pytest.raises(NotFound):
        result = await inbox.answer(grace, item.item_id, GOOD, "g1")
    assert result is None
    with pytest.raises(NotFound):
        await inbox.reply(grace, item.item_id, "hi")
    with pytest.raises(NotFound):
        await inbox.close(grace, item.item_id)
    with pytest.raises(PermissionDenied):
        await inbox.grant(grace, world.agent.account_id, grace.account_id)
    with pytest.raises(PermissionDenied, match="only a person"):
        await inbox.answer(world.agent, item.item_id, GOOD, "a1")

    await inbox.grant(world.human, world.agent.account_id, grace.account_id)
    assert [i.item_id for i in (await inbox.list_items(grace)).items] == [item.item_id]
    taken = await inbox.answer(grace, item.item_id, GOOD, "g1")
    assert taken.outcome is AnswerOutcome.TAKEN and taken.item.answered_by == grace.account_id


async def test_one_workspace_never_reads_or_answers_another_workspaces_thread(
    world: World, inbox: InboxStore
) -> None:
    item, message = await inbox.post(
        world.agent, "k", "t", "", two_question_ask(), [Picture("p", PNG)]
    )
    other = await World.create(world.store)
    for who in (other.human, other.agent):
        assert (await inbox.list_items(who)).items == []
        with pytest.raises(NotFound):
            await inbox.read_thread(who, item.item_id)
    with pytest.raises(NotFound):
        await inbox.answer(other.human, item.item_id, GOOD, "x")
    with pytest.raises(NotFound):
        await inbox.get_attachment(other.human, item.item_id, message.attachments[0].attachment_id)
    # The same key in another workspace is another item.
    theirs, _ = await inbox.post(other.agent, "k", "t", "", two_question_ask())
    assert theirs.item_id != item.item_id
    # Row-level security: the other workspace's transaction sees none of these rows.
    for table in ("inbox_items", "inbox_messages", "inbox_files"):
        seen = await rows(other, f"SELECT workspace_id FROM {table}")
        assert {r["workspace_id"] for r in seen} <= {other.workspace_id}, table
    assert (await inbox.read_thread(world.human, item.item_id)).item.status is InboxStatus.OPEN


# --- the open bound ---------------------------------------------------------------


async def test_a_post_past_the_open_bound_is_refused_and_writes_nothing(world: World) -> None:
    inbox = InboxStore(world.store.db, max_open_per_agent=2)
    first, _ = await inbox.post(world.agent, "a", "t", "", yes_no())
    await inbox.post(world.agent, "b", "t", "", yes_no())
    start = await world.store.last_event_id(world.human)
    with pytest.raises(ResourceExhausted, match="limit is 2"):
        await inbox.post(world.agent, "c", "t", "", yes_no())
    assert await rows(world, "SELECT 1 FROM inbox_items WHERE key = 'c'") == []
    assert await events_since(world, start) == []
    # A re-post on an open item takes no new place; a note takes none at all.
    await inbox.post(world.agent, "a", "", "", yes_no())
    await inbox.post(world.agent, "c", "t", "just so you know")
    with pytest.raises(ResourceExhausted):
        await inbox.post(world.agent, "c", "", "", yes_no())
    await inbox.answer(world.human, first.item_id, [Answer("go", ("y",))], "k")
    opened, _ = await inbox.post(world.agent, "c", "", "", yes_no())
    assert opened.status is InboxStatus.OPEN


async def test_taking_back_or_reopening_past_the_open_bound_is_refused_and_changes_nothing(
    world: World,
) -> None:
    inbox = InboxStore(world.store.db, max_open_per_agent=1)
    answered, _ = await inbox.post(world.agent, "a", "t", "", yes_no())
    await inbox.answer(world.human, answered.item_id, [Answer("go", ("y",))], "k")
    closed, _ = await inbox.post(world.agent, "b", "t", "", yes_no())
    await inbox.close(world.human, closed.item_id)
    await inbox.post(world.agent, "c", "t", "", yes_no())  # the one open place
    items_sql = "SELECT key, status, revision FROM inbox_items ORDER BY key"
    thread_sql = "SELECT id, ask_status FROM inbox_messages ORDER BY position"
    before, thread = await rows(world, items_sql), await rows(world, thread_sql)
    start = await world.store.last_event_id(world.human)
    with pytest.raises(ResourceExhausted, match="limit is 1"):
        await inbox.take_back_answer(world.human, answered.item_id)
    with pytest.raises(ResourceExhausted, match="limit is 1"):
        await inbox.reopen(world.human, closed.item_id)
    assert await rows(world, items_sql) == before
    assert await rows(world, thread_sql) == thread
    assert await events_since(world, start) == []


async def test_the_open_bound_holds_when_take_backs_reopens_and_posts_race(world: World) -> None:
    """Each way to open an item takes the agent's lock first, so of three
    racing for the last open place exactly one gets it."""
    inbox = InboxStore(world.store.db, max_open_per_agent=1)
    winners: collections.Counter[str] = collections.Counter()
    for trial in range(20):
        answered, _ = await inbox.post(world.agent, f"a{trial}", "t", "", yes_no())
        await inbox.answer(world.human, answered.item_id, [Answer("go", ("y",))], "k")
        closed, _ = await inbox.post(world.agent, f"b{trial}", "t", "", yes_no())
        await inbox.close(world.human, closed.item_id)
        outcomes = await asyncio.gather(
            inbox.take_back_answer(world.human, answered.item_id),
            inbox.reopen(world.human, closed.item_id),
            inbox.post(world.agent, f"c{trial}", "t", "", yes_no()),
            return_exceptions=True,
        )
        won = [
            name
            for name, outcome in zip(("take_back", "reopen", "post"), outcomes, strict=True)
            if not isinstance(outcome, BaseException)
        ]
        refused = [o for o in outcomes if isinstance(o, BaseException)]
        assert len(won) == 1, (trial, outcomes)
        assert all(isinstance(o, ResourceExhausted) for o in refused), (trial, outcomes)
        winners[won[0]] += 1
        (still_open,) = await rows(
            world,
            "SELECT id FROM inbox_items WHERE agent_id = %(a)s AND status = 'open'",
            a=world.agent.account_id,
        )
        await inbox.close(world.human, still_open["id"])
    assert sum(winners.values()) == 20


# --- presence -----------------------------------------------------------------------


async def agent_presence(world: World) -> PresenceState:
    (p,) = await world.store.get_presence(world.human, [world.agent.account_id])
    return p.state


async def presence_events(world: World, after: int) -> list[PresenceState]:
    return [e.presence.state for e in await events_since(world, after) if e.presence is not None]


async def test_an_open_inbox_ask_makes_the_agent_waiting_until_it_closes(
    world: World, inbox: InboxStore
) -> None:
    assert await agent_presence(world) is PresenceState.OFFLINE
    await inbox.post(world.agent, "fyi", "FYI", "a note waits on nobody")
    assert await agent_presence(world) is PresenceState.OFFLINE
    start = await world.store.last_event_id(world.human)
    item, _ = await inbox.post(world.agent, "k", "t", "", yes_no())
    assert await agent_presence(world) is PresenceState.WAITING
    await inbox.post(world.agent, "k", "", "", yes_no())  # replaced: still waiting
    assert await presence_events(world, start) == [PresenceState.WAITING]

    steps = [
        (inbox.answer(world.human, item.item_id, [Answer("go", ("y",))], "c1"), "offline"),
        (inbox.take_back_answer(world.human, item.item_id), "waiting"),
        (inbox.close(world.human, item.item_id), "offline"),
        (inbox.reopen(world.human, item.item_id), "waiting"),
        (inbox.decline(world.human, item.item_id, "not now"), "offline"),
        (inbox.reopen(world.human, item.item_id), "waiting"),
        (inbox.close_as_agent(world.agent, "k", "moot"), "offline"),
    ]
    for step, state in steps:
        mark = await world.store.last_event_id(world.human)
        await step
        assert await agent_presence(world) is PresenceState(state)
        assert await presence_events(world, mark) == [PresenceState(state)]

    # An open channel ask and an open inbox ask: WAITING until both close.
    message = await world.post_ask()
    second, _ = await inbox.post(world.agent, "k2", "t", "", yes_no())
    await inbox.close(world.human, second.item_id)
    assert await agent_presence(world) is PresenceState.WAITING
    await world.store.cancel_ask(world.agent, message.blocks[0].ask_id)  # type: ignore[union-attr]
    assert await agent_presence(world) is PresenceState.OFFLINE


# --- events -------------------------------------------------------------------------


async def test_each_change_appends_one_inbox_event_for_its_audience(
    world: World, inbox: InboxStore
) -> None:
    start = await world.store.last_event_id(world.human)
    item, posted = await inbox.post(world.agent, "k", "t", "", two_question_ask())
    await inbox.grant(world.human, world.agent.account_id, world.other_human.account_id)
    taken = await inbox.answer(world.other_human, item.item_id, GOOD, "c")
    events = [e for e in await events_since(world, start) if e.presence is None]
    assert [e.kind for e in events] == [EventKind.INBOX_ITEM_CHANGED] * 2
    first, second = (e.inbox for e in events)
    assert first is not None and second is not None
    assert first.audience == tuple(sorted([world.agent.account_id, world.human.account_id]))
    assert set(second.audience) == {
        world.agent.account_id,
        world.human.account_id,
        world.other_human.account_id,
    }
    assert (first.status, first.revision, first.actor_id) == (
        InboxStatus.OPEN,
        1,
        world.agent.account_id,
    )
    assert first.message == posted
    assert second.status is InboxStatus.ANSWERED and second.message == taken.message
    assert all(e.channel_id is None for e in events)


async def test_a_thread_read_is_bounded_in_bytes_and_keeps_the_newest(
    world: World, inbox: InboxStore
) -> None:
    inbox.thread_bytes = 100_000
    item, first = await inbox.post(world.agent, "k", "t", "Starting out")
    for i in range(12):
        await inbox.reply_as_agent(world.agent, "k", f"{i} " + "x" * 20_000)
    thread = await inbox.read_thread(world.human, item.item_id, limit=200)
    kept = [m.blocks[0].text.split(" ")[0] for m in thread.messages[1:]]  # type: ignore[union-attr]
    # The newest that fit in 100 KB as stored, the first message besides.
    assert thread.messages[0].message_id == first.message_id
    assert kept == [str(i) for i in range(12 - len(kept), 12)]
    assert 3 <= len(kept) <= 5, kept
    assert thread.total == 13
