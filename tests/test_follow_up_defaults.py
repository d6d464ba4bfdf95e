"""Follow-up defaults per workspace and per channel: an ask posted without a
policy takes its channel's, else its workspace's, else the server's setting;
its own policy wins. Who may set each, what is refused, and that it is kept."""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

import psycopg
import pytest
from google.protobuf import duration_pb2

from compass.v1 import admin_pb2 as ad
from compass.v1 import comms_pb2 as pb
from compass_server.store import Database, Store
from compass_server.store.blocks import follow_up_default
from compass_server.store.types import Ask, FollowUp
from tests.servers import CallError, Client
from tests.world import World, two_question_ask

M = datetime.timedelta(minutes=1)


def tok(w: World, who: Any) -> str:
    return w.tokens[who.account_id]


def minutes(n: float) -> duration_pb2.Duration:
    out = duration_pb2.Duration()
    out.FromTimedelta(n * M)
    return out


def policy(remind: float = 0, times: int = 0, escalate: float = 0, owner: bool = False) -> Any:
    out = pb.AskFollowUp(remind_times=times, escalate_to_owner=owner)
    if remind:
        out.remind_after.CopyFrom(minutes(remind))
    if escalate:
        out.escalate_after.CopyFrom(minutes(escalate))
    return out


def wire_ask(follow_up: Any = None) -> Any:
    # Each one new: an identical open ask's post is the open one.
    asked = f"Ship it? ({uuid.uuid4().hex[:6]})"
    ask = pb.Ask(questions=[pb.AskQuestion(question_id="q", question=asked)])
    if follow_up is not None:
        ask.follow_up.CopyFrom(follow_up)
    return pb.MessageBlock(ask=ask)


async def posted_policy(client: Client, w: World, channel_id: Any, follow_up: Any = None) -> Any:
    """The follow-up the ask took, as the poster reads it back (None: none)."""
    r = await client.call(
        "PostMessage",
        pb.PostMessageRequest(channel_id=str(channel_id), blocks=[wire_ask(follow_up)]),
        tok(w, w.agent),
    )
    got = await client.call(
        "GetMessage", pb.GetMessageRequest(message_id=r.message.message_id), tok(w, w.human)
    )
    ask = got.message.blocks[0].ask
    return ask.follow_up if ask.HasField("follow_up") else None


async def stored(db_url: str, sql: str, key: Any) -> Any:
    async with await psycopg.AsyncConnection.connect(db_url) as conn:
        row = await (await conn.execute(sql, (key,))).fetchone()
    assert row is not None
    return row[0]


async def test_each_level_applies_in_order_and_an_asks_own_wins(
    client: Client, api_world: World, server: Any
) -> None:
    w = api_world
    other = await client.call(
        "CreateChannel", pb.CreateChannelRequest(name="other"), tok(w, w.human)
    )
    other_id = other.channel.channel_id
    await client.call(
        "AddChannelMember",
        pb.AddChannelMemberRequest(channel_id=other_id, account_id=str(w.agent.account_id)),
        tok(w, w.human),
    )
    # Nothing set anywhere (the test server's setting is empty): none.
    assert await posted_policy(client, w, w.channel.channel_id) is None

    ws_policy = policy(remind=30, times=2, escalate=240, owner=True)
    r = await client.call(
        "SetWorkspaceFollowUpDefault",
        ad.SetWorkspaceFollowUpDefaultRequest(follow_up=ws_policy),
        tok(w, w.human),
    )
    assert r.follow_up == ws_policy
    assert await posted_policy(client, w, w.channel.channel_id) == ws_policy
    assert await posted_policy(client, w, other_id) == ws_policy

    ch_policy = policy(remind=10)
    r = await client.call(
        "SetChannelFollowUpDefault",
        pb.SetChannelFollowUpDefaultRequest(
            channel_id=str(w.channel.channel_id), follow_up=ch_policy
        ),
        tok(w, w.human),
    )
    # Stored settled: remind_after alone reminds once.
    assert r.follow_up == policy(remind=10, times=1)
    # The channel's goes before the workspace's, in that channel only.
    assert await posted_policy(client, w, w.channel.channel_id) == policy(remind=10, times=1)
    assert await posted_policy(client, w, other_id) == ws_policy
    # The ask's own policy wins; an empty one is none.
    own = policy(remind=5, times=3)
    assert await posted_policy(client, w, w.channel.channel_id, own) == own
    assert await posted_policy(client, w, w.channel.channel_id, pb.AskFollowUp()) is None

    # A channel's "no follow-ups" (an empty policy) overrides the workspace's.
    await client.call(
        "SetChannelFollowUpDefault",
        pb.SetChannelFollowUpDefaultRequest(channel_id=other_id, follow_up=pb.AskFollowUp()),
        tok(w, w.human),
    )
    assert await posted_policy(client, w, other_id) is None
    got = await client.call(
        "GetChannelFollowUpDefault",
        pb.GetChannelFollowUpDefaultRequest(channel_id=other_id),
        tok(w, w.human),
    )
    assert got.HasField("follow_up") and got.follow_up == pb.AskFollowUp()
    # Cleared: the workspace's applies again.
    await client.call(
        "SetChannelFollowUpDefault",
        pb.SetChannelFollowUpDefaultRequest(channel_id=other_id),
        tok(w, w.human),
    )
    assert await posted_policy(client, w, other_id) == ws_policy

    # Kept in the database, read back by a fresh connection.
    url = server.settings.database_url
    assert await stored(
        url, "SELECT follow_up_default FROM workspaces WHERE id = %s", w.workspace_id
    ) == {
        "remind_after_s": 1800.0,
        "remind_times": 2,
        "escalate_after_s": 14400.0,
        "escalate_to": [],
        "escalate_to_owner": True,
    }
    assert await stored(
        url, "SELECT follow_up_default FROM channels WHERE id = %s", w.channel.channel_id
    ) == {"remind_after_s": 600.0, "remind_times": 1}
    assert (
        await stored(url, "SELECT follow_up_default FROM channels WHERE id = %s", other_id) is None
    )
    got_ws = await client.call(
        "GetWorkspaceFollowUpDefault", ad.GetWorkspaceFollowUpDefaultRequest(), tok(w, w.human)
    )
    assert got_ws.follow_up == ws_policy

    # A quorum ask keeps the default's reminders only.
    quorum = pb.Ask(
        questions=[pb.AskQuestion(question_id="q", question="Ship it?")],
        answerer_account_ids=[str(w.human.account_id)],
        quorum=1,
    )
    r = await client.call(
        "PostMessage",
        pb.PostMessageRequest(channel_id=other_id, blocks=[pb.MessageBlock(ask=quorum)]),
        tok(w, w.agent),
    )
    assert r.message.blocks[0].ask.follow_up == policy(remind=30, times=2)


async def test_who_may_set_a_default(client: Client, api_world: World) -> None:
    w = api_world
    general = str(w.channel.channel_id)
    await client.call(
        "AddChannelMember",
        pb.AddChannelMemberRequest(channel_id=general, account_id=str(w.other_human.account_id)),
        tok(w, w.human),
    )
    one = policy(remind=30)
    # A member who isn't an admin: neither the workspace's nor a channel they
    # didn't create.
    for method, request in [
        ("SetWorkspaceFollowUpDefault", ad.SetWorkspaceFollowUpDefaultRequest(follow_up=one)),
        ("GetWorkspaceFollowUpDefault", ad.GetWorkspaceFollowUpDefaultRequest()),
        (
            "SetChannelFollowUpDefault",
            pb.SetChannelFollowUpDefaultRequest(channel_id=general, follow_up=one),
        ),
    ]:
        with pytest.raises(CallError) as err:
            await client.call(method, request, tok(w, w.other_human))
        assert err.value.code == "permission_denied", method
        assert "admin" in err.value.message
    # An agent can't set its channel's default.
    with pytest.raises(CallError) as err:
        await client.call(
            "SetChannelFollowUpDefault",
            pb.SetChannelFollowUpDefaultRequest(channel_id=general, follow_up=one),
            tok(w, w.agent),
        )
    assert err.value.code == "permission_denied"
    # The member may read it, and may set the default of a channel they created.
    got = await client.call(
        "GetChannelFollowUpDefault",
        pb.GetChannelFollowUpDefaultRequest(channel_id=general),
        tok(w, w.other_human),
    )
    assert not got.HasField("follow_up")
    mine = await client.call(
        "CreateChannel", pb.CreateChannelRequest(name="mine"), tok(w, w.other_human)
    )
    r = await client.call(
        "SetChannelFollowUpDefault",
        pb.SetChannelFollowUpDefaultRequest(channel_id=mine.channel.channel_id, follow_up=one),
        tok(w, w.other_human),
    )
    assert r.follow_up == policy(remind=30, times=1)
    # A channel one doesn't take part in is not found, even for an admin.
    with pytest.raises(CallError) as err:
        await client.call(
            "SetChannelFollowUpDefault",
            pb.SetChannelFollowUpDefaultRequest(channel_id=mine.channel.channel_id),
            tok(w, w.human),
        )
    assert err.value.code == "not_found"


async def test_an_invalid_default_is_refused_and_nothing_changes(
    client: Client, api_world: World
) -> None:
    w = api_world
    general = str(w.channel.channel_id)
    bad = [
        (policy(remind=30, times=9), "remind_times must be 0 to 5"),
        (policy(remind=8 * 24 * 60), "remind_after must be"),
        (policy(escalate=60), "escalates to nobody"),
        (
            pb.AskFollowUp(
                escalate_after=minutes(60), escalate_to_account_ids=[str(w.human.account_id)]
            ),
            "names no people or channel",
        ),
        (
            pb.AskFollowUp(escalate_after=minutes(60), escalate_to_channel_id=general),
            "names no people or channel",
        ),
    ]
    for follow_up, said in bad:
        for method, request in [
            (
                "SetWorkspaceFollowUpDefault",
                ad.SetWorkspaceFollowUpDefaultRequest(follow_up=follow_up),
            ),
            (
                "SetChannelFollowUpDefault",
                pb.SetChannelFollowUpDefaultRequest(channel_id=general, follow_up=follow_up),
            ),
        ]:
            with pytest.raises(CallError) as err:
                await client.call(method, request, tok(w, w.human))
            assert err.value.code == "invalid_argument", (method, said)
            assert said in err.value.message, err.value.message
    assert await posted_policy(client, w, w.channel.channel_id) is None
    dm = await client.call(
        "OpenDM", pb.OpenDMRequest(account_id=str(w.other_human.account_id)), tok(w, w.human)
    )
    with pytest.raises(CallError) as err:
        await client.call(
            "SetChannelFollowUpDefault",
            pb.SetChannelFollowUpDefaultRequest(
                channel_id=dm.channel.channel_id, follow_up=policy(remind=30)
            ),
            tok(w, w.human),
        )
    assert err.value.code == "invalid_argument" and "DM" in err.value.message


async def test_the_servers_setting_comes_last(world: World, db: Database) -> None:
    store = Store(db)
    store.follow_up_default = follow_up_default("remind=30m,times=2")
    w = world

    async def took() -> FollowUp | None:
        posted = await store.append_message(w.agent, w.channel.channel_id, [two_question_ask()])
        (ask,) = [b for b in posted.blocks if isinstance(b, Ask)]
        return ask.follow_up

    assert await took() == FollowUp(remind_after=30 * M, remind_times=2)
    await store.set_workspace_follow_up_default(
        w.human, FollowUp(escalate_after=60 * M, escalate_to_owner=True)
    )
    assert await took() == FollowUp(escalate_after=60 * M, escalate_to_owner=True)
    await store.set_workspace_follow_up_default(w.human, FollowUp())
    assert await took() is None
    await store.set_workspace_follow_up_default(w.human, None)
    assert await took() == FollowUp(remind_after=30 * M, remind_times=2)
    # Another server's store reads what this one set.
    await store.set_channel_follow_up_default(
        w.human, w.channel.channel_id, FollowUp(remind_after=5 * M)
    )
    again = Store(db)
    assert await again.channel_follow_up_default(w.agent, w.channel.channel_id) == FollowUp(
        remind_after=5 * M, remind_times=1
    )
    posted = await again.append_message(
        w.agent,
        w.channel.channel_id,
        [dataclasses.replace(two_question_ask(), follow_up=FollowUp(remind_after=9 * M))],
    )
    (ask,) = [b for b in posted.blocks if isinstance(b, Ask)]
    assert ask.follow_up == FollowUp(remind_after=9 * M, remind_times=1)


async def test_the_operator_sets_and_shows_defaults(database_url: str, world: World) -> None:
    from tests.test_admin_cli import cli

    w = world
    ws, ch = str(w.workspace_id), str(w.channel.channel_id)
    assert cli(database_url, "show-follow-up-default", "--workspace", ws) == {
        "workspace_id": ws,
        "follow_up": None,
        "inherits": True,
    }
    set_ws = cli(
        database_url,
        "set-follow-up-default",
        "--workspace",
        ws,
        "--policy",
        "remind=30m,times=2,escalate=4h,owner",
    )
    assert set_ws["follow_up"] == {
        "remind_after_seconds": 1800.0,
        "remind_times": 2,
        "escalate_after_seconds": 14400.0,
        "escalate_to_owner": True,
    }
    cli(database_url, "set-follow-up-default", "--channel", ch, "--policy", "none")
    assert cli(database_url, "show-follow-up-default", "--channel", ch) == {
        "channel_id": ch,
        "follow_up": {},
        "inherits": False,
    }
    # What the operator set is what a post reads.
    assert await w.store.channel_follow_up_default(w.human, w.channel.channel_id) == FollowUp()
    assert await w.store.workspace_follow_up_default(w.human) == FollowUp(
        remind_after=30 * M, remind_times=2, escalate_after=240 * M, escalate_to_owner=True
    )
    bad = cli(
        database_url, "set-follow-up-default", "--channel", ch, "--policy", "remind=1s", ok=False
    )
    assert "remind_after must be 1 minute to 7 days" in bad["error"]
    bad = cli(
        database_url, "set-follow-up-default", "--workspace", ws, "--policy", "soon", ok=False
    )
    assert "is not remind=WAIT" in bad["error"]
    cli(database_url, "set-follow-up-default", "--channel", ch, "--policy", "inherit")
    assert await w.store.channel_follow_up_default(w.human, w.channel.channel_id) is None


async def test_a_channels_default_reminds_when_due(world: World, db: Database) -> None:
    import asyncio

    from compass_server.asks import Expiry
    from compass_server.store.blocks import DeadlineBounds

    short = DeadlineBounds(datetime.timedelta(milliseconds=1), datetime.timedelta(days=30))
    store = Store(db, deadline_bounds=short)
    w = world
    await store.set_channel_follow_up_default(
        w.human, w.channel.channel_id, FollowUp(remind_after=datetime.timedelta(seconds=0.3))
    )
    posted = await store.append_message(w.agent, w.channel.channel_id, [two_question_ask()])
    (ask,) = [b for b in posted.blocks if isinstance(b, Ask)]
    expiry = Expiry(store, interval=0.1)
    await expiry.start()
    try:
        give_up = asyncio.get_running_loop().time() + 20
        while not (await store._ask_state(w.human, ask.ask_id)).follow_up_steps:
            assert asyncio.get_running_loop().time() < give_up
            await asyncio.sleep(0.05)
    finally:
        await expiry.stop()
    (step,) = (await store._ask_state(w.human, ask.ask_id)).follow_up_steps
    assert step.kind == "reminded"
