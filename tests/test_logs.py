"""Logs: JSON lines with the call's method and actor, access lines that can be
turned off, and never a token."""

from __future__ import annotations

import json
import subprocess

import httpx

from compass.v1 import comms_pb2 as pb
from compass_server.store import Database, Store
from tests.servers import CallError, GrpcClient, serve_process, stop_process
from tests.world import World


def stop(proc: subprocess.Popen[str]) -> str:
    code, err = stop_process(proc)
    assert code == 0, err
    return err


async def work(database_url: str, grpc_port: int, http_port: int) -> tuple[World, list[str]]:
    """Calls with good and bad tokens over gRPC and Connect; the tokens used."""
    db = Database(database_url, min_size=1, max_size=2)
    await db.open()
    try:
        world = await World.create(Store(db))
    finally:
        await db.close()
    human = world.tokens[world.human.account_id]
    agent = world.tokens[world.agent.account_id]
    bogus = "cpt_" + "z" * 40
    client = GrpcClient(grpc_port)
    try:
        await client.call(
            "PostMessage",
            pb.PostMessageRequest(
                channel_id=str(world.channel.channel_id),
                blocks=[pb.MessageBlock(text=pb.TextBlock(text="hello"))],
            ),
            agent,
        )
        try:
            await client.call("ListChannels", pb.ListChannelsRequest(), bogus)
        except CallError as exc:
            assert exc.code == "unauthenticated"
    finally:
        await client.close()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{http_port}") as http:
        listed = await http.post(
            "/compass.v1.CommsService/ListChannels",
            json={},
            headers={"authorization": f"Bearer {human}"},
        )
        assert listed.status_code == 200
        refused = await http.post(
            "/compass.v1.CommsService/ListChannels",
            json={},
            headers={"authorization": f"Bearer {bogus}"},
        )
        assert refused.status_code == 401
    return world, [human, agent, bogus]


async def test_json_lines_with_method_and_actor_and_never_a_token(database_url: str) -> None:
    proc = serve_process(database_url, COMPASS_LOG_FORMAT="json")
    assert proc.stdout is not None
    ready = json.loads(proc.stdout.readline())
    world, tokens = await work(database_url, ready["grpc_port"], ready["http_port"])
    err = stop(proc)
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert lines, err
    for line in lines:
        assert {"time", "level", "logger", "message"} <= set(line), line
    access = [line for line in lines if line["logger"] == "compass_server.access"]
    posted = [a for a in access if a["method"] == "CommsService/PostMessage"]
    assert posted and posted[0]["level"] == "INFO"
    assert posted[0]["actor_id"] == str(world.agent.account_id)
    assert posted[0]["status"] == "ok" and posted[0]["transport"] == "grpc"
    listed = [a for a in access if a["transport"] == "connect" and a["status"] == "ok"]
    assert listed and listed[0]["actor_id"] == str(world.human.account_id)
    refused = [a for a in access if a["status"] == "unauthenticated"]
    assert {a["transport"] for a in refused} == {"grpc", "connect"}
    assert all("actor_id" not in a for a in refused)
    for token in tokens:
        assert token not in err
        # Not even the secret part after the prefix.
        assert token.split("_", 1)[-1] not in err


async def test_access_lines_can_be_turned_off(database_url: str) -> None:
    proc = serve_process(database_url, COMPASS_LOG_ACCESS="false")
    assert proc.stdout is not None
    ready = json.loads(proc.stdout.readline())
    _, tokens = await work(database_url, ready["grpc_port"], ready["http_port"])
    err = stop(proc)
    # Text lines, as by default; the server still narrates, but no call is logged.
    assert "listening" in err
    assert "CommsService/" not in err
    for token in tokens:
        assert token not in err
