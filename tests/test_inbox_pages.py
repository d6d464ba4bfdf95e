"""GetInboxItem in pages: a thread of any length read whole, page by page,
each page bounded in bytes, and the reads of long threads bounded per
process and per account; over gRPC, Connect binary and Connect JSON."""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from compass.v1 import inbox_pb2 as ib
from tests.conftest import running_server
from tests.test_inbox_api import Client, InboxConnect, InboxGrpc, expect, tok
from tests.test_inbox_store import yes_no
from tests.world import World

pytestmark = pytest.mark.timeout(120)

# Small bounds, so a few messages of a few KB fill a page and the budget.
PAGE = 25_000
WAIT = 0.5


@pytest.fixture(scope="module")
async def paged(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    async with running_server(
        database_url,
        tmp_path_factory.mktemp("pages"),
        inbox_read_bytes=PAGE,
        inbox_reading_bytes=3 * PAGE,
        inbox_reading_bytes_per_account=2 * PAGE,
        inbox_read_wait_seconds=WAIT,
    ) as srv:
        yield srv


@pytest.fixture(scope="module", params=["grpc", "json", "proto"])
async def pc(request: pytest.FixtureRequest, paged: Any) -> AsyncIterator[Client]:
    c: Client = (
        InboxGrpc(paged.grpc_port)
        if request.param == "grpc"
        else InboxConnect(paged.http_port, request.param)
    )
    yield c
    await c.close()


@pytest.fixture
async def w(paged: Any) -> World:
    return await World.create(paged.store)


def texts(thread: Any) -> list[str]:
    return [m.message.blocks[0].text.text.split(" ")[0] for m in thread]


def ids(thread: Any) -> list[str]:
    return [m.message.message_id for m in thread]


def text_bytes(m: ib.InboxMessage) -> int:
    return sum(len(b.text.text.encode()) for b in m.message.blocks if b.HasField("text"))


async def read_all(
    c: Client, w: World, item_id: str, limit: int = 0
) -> tuple[ib.GetInboxItemResponse, list[ib.GetInboxItemResponse]]:
    """The first page, and every page in the order read."""
    pages = []
    token = ""
    while True:
        page = await c.call(
            "GetInboxItem",
            ib.GetInboxItemRequest(item_id=item_id, message_limit=limit, page_token=token),
            tok(w, w.human),
        )
        pages.append(page)
        token = page.next_page_token
        if not token:
            return pages[0], pages
        assert len(pages) < 100


def whole(pages: list[ib.GetInboxItemResponse]) -> list[Any]:
    """The thread from its pages: each page's run, oldest page first."""
    out: list[Any] = []
    for page in reversed(pages):
        out.extend(page.thread[page.pinned_messages :])
    return out


async def test_a_long_thread_reads_whole_in_pages_each_message_once_in_order(
    pc: Client, w: World, paged: Any
) -> None:
    inbox = paged.inbox
    item, first = await inbox.post(w.agent, "k", "t", "start here")
    written = [first]
    for i in range(30):
        if i == 11:
            _, m = await inbox.post(w.agent, "k", "t", f"ask{i} decide", yes_no())
        else:
            _, m = await inbox.reply_as_agent(w.agent, "k", f"r{i} more")
        written.append(m)
    iid = str(item.item_id)

    head, pages = await read_all(pc, w, iid, limit=4)
    # The first page: the first message and the open ask, then the latest 4.
    assert head.pinned_messages == 2
    assert texts(head.thread) == ["start", "ask11", "r26", "r27", "r28", "r29"]
    assert len(pages) == 8  # 31 messages, 4 a page
    assert all(p.pinned_messages == 0 for p in pages[1:])
    assert all(1 <= len(p.thread) - p.pinned_messages <= 4 for p in pages)
    assert all(p.total_messages == 31 for p in pages)
    assert all(p.item.item_id == iid for p in pages)
    assert ids(whole(pages)) == [str(m.message_id) for m in written]

    # Read with the default limit: one page, nothing pinned, nothing more.
    head, pages = await read_all(pc, w, iid)
    assert len(pages) == 1 and head.pinned_messages == 0 and head.next_page_token == ""
    assert ids(head.thread) == [str(m.message_id) for m in written]

    # A short thread: one page, and the first message is in its run.
    short, _ = await inbox.post(w.agent, "short", "t", "only one")
    head, pages = await read_all(pc, w, str(short.item_id), limit=1)
    assert len(pages) == 1 and head.pinned_messages == 0 and texts(head.thread) == ["only"]


async def test_a_page_stops_at_the_byte_bound_and_holds_a_message_at_least(
    pc: Client, w: World, paged: Any
) -> None:
    inbox = paged.inbox
    item, first = await inbox.post(w.agent, "k", "t", "start")
    written = [first]
    for i in range(12):
        _, m = await inbox.reply_as_agent(w.agent, "k", f"r{i} " + "x" * 8_000)
        written.append(m)
    head, pages = await read_all(pc, w, str(item.item_id), limit=200)
    # ~8 KB a message: three fit in a page of 25 KB, never more.
    assert [len(p.thread) for p in pages[1:-1]] == [3] * (len(pages) - 2)
    for p in pages:
        assert sum(text_bytes(m) for m in p.thread) <= PAGE
    assert head.pinned_messages == 1 and texts(head.thread) == ["start", "r9", "r10", "r11"]
    assert ids(whole(pages)) == [str(m.message_id) for m in written]

    # Messages each over the bound: a page holds one, and paging goes on.
    big, _ = await inbox.post(w.agent, "big", "t", "b0 " + "y" * 30_000)
    for i in range(1, 4):
        await inbox.reply_as_agent(w.agent, "big", f"b{i} " + "y" * 30_000)
    head, pages = await read_all(pc, w, str(big.item_id), limit=200)
    assert head.pinned_messages == 1 and texts(head.thread) == ["b0", "b3"]
    assert [texts(p.thread[p.pinned_messages :]) for p in pages] == [["b3"], ["b2"], ["b1"], ["b0"]]


async def test_a_page_token_not_issued_for_the_item_is_invalid_argument(
    pc: Client, w: World, paged: Any
) -> None:
    inbox = paged.inbox
    one, _ = await inbox.post(w.agent, "one", "t", "a")
    two, _ = await inbox.post(w.agent, "two", "t", "a")
    for i in range(3):
        await inbox.reply_as_agent(w.agent, "one", f"r{i}")
        await inbox.reply_as_agent(w.agent, "two", f"r{i}")
    h = tok(w, w.human)
    page = await pc.call(
        "GetInboxItem", ib.GetInboxItemRequest(item_id=str(one.item_id), message_limit=1), h
    )
    assert page.next_page_token

    def b64(text: str) -> str:
        return base64.urlsafe_b64encode(text.encode()).decode()

    forged = [
        "%%",
        "not base64!",
        b64("garbage"),
        b64(f"{one.item_id}|x"),
        b64(f"{one.item_id}|-4"),
        b64(f"{one.item_id}|{1 << 64}"),
        b64(f"{one.item_id}|1|2"),
        b64("nope|3"),
    ]
    for token in forged:
        err = await expect(
            "invalid_argument",
            pc.call(
                "GetInboxItem",
                ib.GetInboxItemRequest(item_id=str(one.item_id), page_token=token),
                h,
            ),
        )
        assert err.message == "page_token is not one this server issued", (token, err)
    err = await expect(
        "invalid_argument",
        pc.call(
            "GetInboxItem",
            ib.GetInboxItemRequest(item_id=str(two.item_id), page_token=page.next_page_token),
            h,
        ),
    )
    assert err.message == "page_token is of another inbox item"
    # Another person can't read past a token of an item they don't see.
    await expect(
        "not_found",
        pc.call(
            "GetInboxItem",
            ib.GetInboxItemRequest(item_id=str(one.item_id), page_token=page.next_page_token),
            tok(w, w.other_human),
        ),
    )


async def _blocked_reads(database_url: str, n: int) -> None:
    """Until n reads wait on the locked table of pictures."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        for _ in range(400):
            cur = await conn.execute(
                "SELECT count(*) FROM pg_locks "
                "WHERE relation = 'inbox_files'::regclass AND NOT granted"
            )
            row = await cur.fetchone()
            assert row is not None
            if row[0] >= n:
                return
            await asyncio.sleep(0.05)
    raise AssertionError(f"{n} reads never reached the database")


async def test_long_reads_past_the_budget_wait_then_are_exhausted_and_others_still_read(
    pc: Client, w: World, paged: Any, database_url: str
) -> None:
    inbox = paged.inbox
    item, _ = await inbox.post(w.agent, "k", "t", "start")
    for i in range(3):
        await inbox.reply_as_agent(w.agent, "k", f"r{i} " + "x" * 8_000)
    grace = w.other_human
    third = await w.add_account("hopper")
    await inbox.grant(w.human, w.agent.account_id, grace.account_id)
    await inbox.grant(w.human, w.agent.account_id, third.account_id)
    # Three messages, ~24 KB: a page of its own, two to an account's share and
    # three to the process's.
    req = ib.GetInboxItemRequest(item_id=str(item.item_id), message_limit=3)

    def read(who: Any) -> Any:
        return asyncio.ensure_future(pc.call("GetInboxItem", req, tok(w, who)))

    # Lock the pictures' table, so the reads that got their bytes wait at the
    # database while holding them.
    async with await psycopg.AsyncConnection.connect(database_url) as lock:
        await lock.execute("LOCK TABLE inbox_files IN ACCESS EXCLUSIVE MODE")
        held = [read(w.human), read(w.human)]
        await _blocked_reads(database_url, 2)
        held.append(read(grace))  # another account's read still gets its turn
        await _blocked_reads(database_url, 3)

        # Over the account's share, then over the process's: a wait, then no.
        for who in (w.human, third):
            started = asyncio.get_running_loop().time()
            err = await expect("resource_exhausted", pc.call("GetInboxItem", req, tok(w, who)))
            assert asyncio.get_running_loop().time() - started >= WAIT * 0.9
            assert "long threads" in err.message and "try again" in err.message, err
        assert not any(t.done() for t in held)
        await lock.rollback()

    for t in held:
        page = await t
        assert texts(page.thread) == ["start", "r0", "r1", "r2"]
    # The bytes came back: the same reads go through again.
    for who in (w.human, w.human, third):
        page = await pc.call("GetInboxItem", req, tok(w, who))
        assert texts(page.thread) == ["start", "r0", "r1", "r2"]


async def test_a_read_given_up_while_bytes_come_back_leaves_the_budget_whole() -> None:
    """A waiting read ended by its wait (or its client) just as another read
    hands its bytes back: the hand-back neither fails nor grants the gone one."""
    from compass_server.events.hub import Budget

    budget = Budget(total=2, per_owner=2)
    first, gone, later = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    await budget.take(first, 2)
    waiting = asyncio.ensure_future(budget.take(gone, 1))
    await asyncio.sleep(0)
    waiting.cancel()
    budget.give(first, 2)  # before the cancelled taker has run again
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await asyncio.wait_for(budget.take(later, 2), 1)
    assert budget.used == 2 and dict(budget.owners) == {later: 2}
