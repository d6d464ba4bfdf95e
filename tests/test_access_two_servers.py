"""Revocation, rotation and unassignment made through one `compass-server`
process (or the operator's command line) hold on another sharing the database:
the next call is refused, streams end, sessions unbind."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from compass.v1 import admin_pb2 as ad
from compass.v1 import comms_pb2 as pb
from tests.procs import ServerProcess
from tests.relay_client import StreamEnded, relay, runner_for
from tests.servers import CallError, ConnectClient, GrpcClient
from tests.test_admin_api import ended, seconds
from tests.test_admin_cli import cli
from tests.world import World

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
async def clients(
    two_servers: tuple[ServerProcess, ServerProcess],
) -> AsyncIterator[tuple[GrpcClient, GrpcClient, ConnectClient]]:
    a, b = two_servers
    out = GrpcClient(a.grpc_port), GrpcClient(b.grpc_port), ConnectClient(b.http_port, "json")
    yield out
    for client in out:
        await client.close()


async def refused(call: Any) -> CallError:
    with pytest.raises(CallError) as info:
        await call
    assert info.value.code == "unauthenticated", info.value
    return info.value


async def test_a_token_revoked_through_one_server_is_refused_on_the_other_at_once(
    world: World, clients: tuple[GrpcClient, GrpcClient, ConnectClient]
) -> None:
    a, b, b_connect = clients
    ada = world.tokens[world.human.account_id]
    made = await a.call(
        "CreateToken",
        ad.CreateTokenRequest(account_id=str(world.other_human.account_id), label="two"),
        ada,
    )
    # B has the token cached, and two streams open with it.
    await b.call("WhoAmI", ad.WhoAmIRequest(), made.token)
    await b_connect.call("WhoAmI", ad.WhoAmIRequest(), made.token)
    grpc_stream = b.stream("Subscribe", pb.SubscribeRequest(), made.token)
    connect_stream = b_connect.stream("Subscribe", pb.SubscribeRequest(), made.token)
    for stream in (grpc_stream, connect_stream):
        assert (await asyncio.wait_for(anext(stream), 10)).WhichOneof("kind") == "ready"

    await a.call("RevokeToken", ad.RevokeTokenRequest(token_id=made.token_info.token_id), ada)
    err = await refused(b.call("WhoAmI", ad.WhoAmIRequest(), made.token))
    assert "revoked" in err.message
    await refused(b_connect.call("WhoAmI", ad.WhoAmIRequest(), made.token))
    for stream in (grpc_stream, connect_stream):
        err = await ended(stream, 5)
        assert err.code == "unauthenticated" and "revoked" in err.message, err
    # Everyone else carries on.
    await b.call("WhoAmI", ad.WhoAmIRequest(), world.tokens[world.other_human.account_id])


async def test_a_runner_token_revoked_by_the_operator_ends_its_relay_on_a_server(
    world: World,
    clients: tuple[GrpcClient, GrpcClient, ConnectClient],
    two_servers: tuple[ServerProcess, ServerProcess],
    database_url: str,
) -> None:
    _, b, _ = clients
    token = await runner_for(world, world.agent)
    me = await b.call("WhoAmI", ad.WhoAmIRequest(), token)
    async with relay(two_servers[1].grpc_port, token) as runner:
        await runner.bound("s1", world.agent)
        revoked = cli(database_url, "revoke-token", me.token_info.token_id)
        assert revoked["token_id"] == me.token_info.token_id and revoked["active"] is False
        end = await asyncio.wait_for(runner.ended, 5)
        assert end.code == "unauthenticated" and "revoked" in end.message, end
    # Its sessions were unbound with it: the agent is offline again.
    (presence,) = (
        await b.call(
            "GetPresence",
            pb.GetPresenceRequest(account_ids=[str(world.agent.account_id)]),
            world.tokens[world.human.account_id],
        )
    ).presences
    assert presence.state == pb.PRESENCE_STATE_OFFLINE
    async with relay(two_servers[1].grpc_port, token) as again:
        end = await asyncio.wait_for(again.ended, 5)
        assert end.code == "unauthenticated"


async def test_unassigning_an_agent_unbinds_its_session_on_the_other_server(
    world: World,
    clients: tuple[GrpcClient, GrpcClient, ConnectClient],
    two_servers: tuple[ServerProcess, ServerProcess],
) -> None:
    a, b, _ = clients
    ada = world.tokens[world.human.account_id]
    second = await world.add_account(f"bot-{world.workspace_id.hex[:6]}", world.agent.kind)
    token = await runner_for(world, world.agent, second)
    runner_id = (await a.call("WhoAmI", ad.WhoAmIRequest(), token)).runner.runner_id
    async with relay(two_servers[1].grpc_port, token) as runner:
        await runner.bound("s1", world.agent)
        await runner.bound("s2", second)
        gone = await a.call(
            "UnassignAgent",
            ad.UnassignAgentRequest(
                runner_id=runner_id, agent_account_id=str(world.agent.account_id)
            ),
            ada,
        )
        assert gone.sessions_unbound == 1
        assert list(gone.runner.agent_account_ids) == [str(second.account_id)]
        why = await asyncio.wait_for(runner.session_frame("s1"), 5)
        assert why.WhichOneof("frame") == "session_error", why
        assert why.session_error.error.code == "not_found"
        assert "no longer assigned" in why.session_error.error.message
        unbound = await asyncio.wait_for(runner.session_frame("s1"), 5)
        assert unbound.WhichOneof("frame") == "unbound", unbound
        # The session is gone: its calls are refused, and it can't bind again.
        result = await runner.call("s1", "list_channels", pb.ListChannelsRequest())
        assert result.error.code == "not_found"
        rebind = await runner.bind("s3", world.agent)
        assert rebind.WhichOneof("frame") == "session_error"
        assert rebind.session_error.error.code == "not_found"
        # The other agent's session is untouched.
        still = await runner.call("s2", "list_channels", pb.ListChannelsRequest())
        assert still.WhichOneof("result") == "list_channels"
        presences = await b.call(
            "GetPresence",
            pb.GetPresenceRequest(
                account_ids=[str(world.agent.account_id), str(second.account_id)]
            ),
            ada,
        )
        states = {p.account_id: p.state for p in presences.presences}
        assert states[str(world.agent.account_id)] == pb.PRESENCE_STATE_OFFLINE
        assert states[str(second.account_id)] != pb.PRESENCE_STATE_OFFLINE
        assert not runner.ended.done()


async def test_rotating_with_a_grace_keeps_the_old_tokens_stream_until_the_grace_ends(
    world: World, clients: tuple[GrpcClient, GrpcClient, ConnectClient]
) -> None:
    a, b, _ = clients
    ada = world.tokens[world.human.account_id]
    made = await a.call(
        "CreateToken", ad.CreateTokenRequest(account_id=str(world.other_human.account_id)), ada
    )
    stream = b.stream("Subscribe", pb.SubscribeRequest(), made.token)
    assert (await asyncio.wait_for(anext(stream), 10)).WhichOneof("kind") == "ready"
    rotated = await a.call(
        "RotateToken",
        ad.RotateTokenRequest(token_id=made.token_info.token_id, grace=seconds(2)),
        ada,
    )
    await b.call("WhoAmI", ad.WhoAmIRequest(), made.token)
    await b.call("WhoAmI", ad.WhoAmIRequest(), rotated.token)
    err = await ended(stream, 8)
    assert err.code == "unauthenticated" and "expired" in err.message, err
    await refused(b.call("WhoAmI", ad.WhoAmIRequest(), made.token))
    await b.call("WhoAmI", ad.WhoAmIRequest(), rotated.token)


async def test_a_relay_bound_with_a_refused_token_never_starts(
    world: World, two_servers: tuple[ServerProcess, ServerProcess]
) -> None:
    async with relay(two_servers[1].grpc_port, "cpr_not-a-token") as runner:
        end = await asyncio.wait_for(runner.ended, 5)
    assert isinstance(end, StreamEnded) and end.code == "unauthenticated"
