"""Every surface that tells of an ending carries its receipt, and each is the
same receipt: the relay's delivery of the answer (or of another ending) to
the agent that asked, the relay's get_ask, GetAskHistory over gRPC and both
Connect codecs, the ending call's own response, webhook payloads and
compass-mcp's structured result. The kit verifies each offline with the
JWKS fetched from the server's well-known path."""

from __future__ import annotations

import asyncio
import datetime
import json
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest

from compass.v1 import admin_pb2 as ad
from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_agentkit.receipts import fetch_jwks, verify_receipt
from compass_server.app import StartupError
from compass_server.store.types import Answer
from compass_server.store.vault import new_key
from tests.conftest import running_server
from tests.receiver import Receiver
from tests.relay_client import RelayClient, relay, runner_for
from tests.servers import ConnectClient, GrpcClient
from tests.test_api_comms import ask_pb
from tests.world import World

pytestmark = pytest.mark.timeout(120)

PUBLIC_URL = "https://compass.example.test"


@pytest.fixture(scope="module")
async def signed(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    """A server with receipt keys that sends webhooks to loopback, quickly."""
    async with running_server(
        database_url,
        tmp_path_factory.mktemp("signed"),
        public_url=PUBLIC_URL,
        webhook_key=new_key(),
        webhook_allowed_networks="127.0.0.0/8",
        webhook_poll_seconds=0.1,
    ) as srv:
        yield srv


async def jwks_of(port: int) -> dict[str, Any]:
    return await asyncio.to_thread(fetch_jwks, f"http://127.0.0.1:{port}")


async def test_the_public_keys_are_served_at_the_well_known_path(signed: Any) -> None:
    async with httpx.AsyncClient() as http:
        got = await http.get(f"http://127.0.0.1:{signed.http_port}/.well-known/jwks.json")
    assert got.status_code == 200
    assert got.headers["content-type"] == "application/jwk-set+json"
    (key,) = got.json()["keys"]
    assert (key["kty"], key["crv"], key["alg"], key["use"]) == ("OKP", "Ed25519", "Ed25519", "sig")
    assert key["kid"] and key["x"] and "d" not in key


async def _answer_delivered(r: RelayClient, ask_id: str) -> pb.AskAnswerBlock:
    while True:
        event = await r.delivery("scout")
        await r.ack("scout", event.event_id)
        for b in event.message_posted.message.blocks:
            if b.HasField("ask_answer") and b.ask_answer.ask_id == ask_id:
                return b.ask_answer


async def _ending_delivered(r: RelayClient, ask_id: str) -> pb.Ask:
    while True:
        event = await r.delivery("scout")
        await r.ack("scout", event.event_id)
        for b in event.message_updated.message.blocks:
            if b.HasField("ask") and b.ask.ask_id == ask_id and b.ask.HasField("ending"):
                return b.ask


async def test_the_agent_hears_each_ending_with_its_receipt_and_every_read_agrees(
    signed: Any,
) -> None:
    w = await World.create(signed.store)
    ada = w.tokens[w.human.account_id]
    keys = await jwks_of(signed.http_port)
    grpc = GrpcClient(signed.grpc_port)
    connects = [ConnectClient(signed.http_port, codec) for codec in ("json", "proto")]
    try:
        async with relay(signed.grpc_port, await runner_for(w)) as r:
            await r.bound("scout", w.agent)
            posted: gw.PostAskResponse = await r.ok(
                "scout",
                "post_ask",
                gw.PostAskRequest(channel_id=str(w.channel.channel_id), ask=ask_pb()),
            )
            asked = posted.message.blocks[-1].ask
            answered = await grpc.call(
                "RespondToAsk",
                pb.RespondToAskRequest(
                    ask_id=posted.ask_id,
                    answers=[
                        pb.AskQuestionAnswer(question_id="db", chosen_option_ids=["pg"]),
                        pb.AskQuestionAnswer(question_id="langs", custom_text="Rust"),
                    ],
                ),
                ada,
            )
            heard = await _answer_delivered(r, posted.ask_id)
            proof = verify_receipt(
                heard.receipt, keys, ask=asked, workspace_id=str(w.workspace_id), issuer=PUBLIC_URL
            )
            assert (proof.ending, proof.by_handle, proof.claims["surface"]) == (
                "answered",
                "ada",
                "grpc",
            )
            assert proof.answer("db") == {"id": "db", "chosen": ["pg"], "text": ""}
            assert proof.answer("langs") == {"id": "langs", "chosen": [], "text": "Rust"}
            # The answer as delivered agrees with it.
            verify_receipt(
                heard.receipt,
                keys,
                ask=pb.Ask(ask_id=heard.ask_id, questions=heard.questions, answered=True),
            )
            # The same receipt wherever the ending is read.
            ended = answered.ask_message.blocks[-1].ask.ending
            assert ended.receipt == heard.receipt
            got = await r.ok("scout", "get_ask", gw.GetAskRequest(ask_id=posted.ask_id))
            assert got.ask.ending.receipt == heard.receipt
            assert got.message.blocks[-1].ask.ending.receipt == heard.receipt
            for client in (grpc, *connects):
                history = await client.call(
                    "GetAskHistory", pb.GetAskHistoryRequest(ask_id=posted.ask_id), ada
                )
                assert [(e.kind, e.receipt) for e in history.entries] == [
                    (pb.ASK_HISTORY_KIND_POSTED, ""),
                    (pb.ASK_HISTORY_KIND_ANSWERED, heard.receipt),
                ], client.name
            # A page of messages, too, and a search.
            page = await grpc.call(
                "ListMessages", pb.ListMessagesRequest(channel_id=str(w.channel.channel_id)), ada
            )
            found = await grpc.call(
                "SearchMessages", pb.SearchMessagesRequest(query="database"), ada
            )
            for listed in (page, found):
                [ask] = [b.ask for m in listed.messages for b in m.blocks if b.HasField("ask")]
                assert ask.ending.receipt == heard.receipt

            declined: gw.PostAskResponse = await r.ok(
                "scout",
                "post_ask",
                gw.PostAskRequest(channel_id=str(w.channel.channel_id), ask=ask_pb()),
            )
            await grpc.call(
                "DeclineAsk", pb.DeclineAskRequest(ask_id=declined.ask_id, reason="later"), ada
            )
            told = await _ending_delivered(r, declined.ask_id)
            proof = verify_receipt(told.ending.receipt, keys, ask=told)
            assert (proof.ending, proof.by_handle, proof.reason, proof.answers) == (
                "declined",
                "ada",
                "later",
                [],
            )

            late = ask_pb()
            late.timeout.FromTimedelta(datetime.timedelta(seconds=0.3))
            expiring: gw.PostAskResponse = await r.ok(
                "scout",
                "post_ask",
                gw.PostAskRequest(channel_id=str(w.channel.channel_id), ask=late),
            )
            told = await _ending_delivered(r, expiring.ask_id)
            proof = verify_receipt(told.ending.receipt, keys, ask=told)
            assert (proof.ending, proof.by_id, proof.at) == (
                "expired",
                None,
                told.deadline.ToDatetime(datetime.UTC),
            )
    finally:
        await grpc.close()
        for c in connects:
            await c.close()


async def test_a_webhook_of_an_ending_carries_its_receipt(signed: Any) -> None:
    w = await World.create(signed.store)
    receiver = await Receiver().start()
    grpc = GrpcClient(signed.grpc_port)
    try:
        await grpc.call(
            "CreateWebhook",
            ad.CreateWebhookRequest(url=receiver.url(), event_types=["ask.answered"]),
            w.tokens[w.human.account_id],
        )
        message = await w.post_ask()
        ask_id = message.blocks[0].ask_id  # type: ignore[union-attr]
        await w.store.answer_ask(w.human, ask_id, [Answer("db", ("my",)), Answer("langs")])
        (arrived,) = await receiver.wait_for(1)
        data = json.loads(arrived.body)["data"]
        proof = verify_receipt(data["ask"]["ending"]["receipt"], await jwks_of(signed.http_port))
        assert (proof.ask_id, proof.ending, proof.by_handle) == (ask_id, "answered", "ada")
        assert proof.answer("db") == {"id": "db", "chosen": ["my"], "text": ""}
        assert proof.asker_id == data["asker"]["account_id"]
    finally:
        await grpc.close()
        await receiver.close()
        # The endpoint of a finished test stops, so the courier leaves it be.
        async with await psycopg.AsyncConnection.connect(signed.database_url) as conn:
            await conn.execute(
                "DELETE FROM webhook_endpoints WHERE workspace_id = %s", (w.workspace_id,)
            )


async def test_compass_mcp_returns_the_receipt_with_the_answer(
    server: Any, api_world: World, tmp_path: pathlib.Path
) -> None:
    from tests.test_mcp_server import QUESTIONS, mcp_for

    async with mcp_for(server, api_world, tmp_path) as m:
        waiting = m.ask_task({"questions": QUESTIONS})
        ask_id = await m.posted_ask_id()
        await m.ada_answers(ask_id)
        result = await asyncio.wait_for(waiting, 30)
        checked = await m.call("check_ask", {"ask_id": ask_id})
    assert result.structured_content is not None and checked.structured_content is not None
    receipt = result.structured_content["receipt"]
    proof = verify_receipt(
        receipt, await jwks_of(server.http_port), workspace_id=str(api_world.workspace_id)
    )
    assert (proof.ask_id, proof.ending, proof.by_handle) == (ask_id, "answered", "ada")
    assert proof.answer("2") == {"id": "2", "chosen": ["0", "1"], "text": "and a CLI"}
    assert checked.structured_content["receipt"] == receipt


async def test_without_receipt_keys_every_receipt_is_empty(
    database_url: str, tmp_path: pathlib.Path
) -> None:
    async with running_server(database_url, tmp_path, receipt_keys_dir=None) as srv:
        assert await jwks_of(srv.http_port) == {"keys": []}
        w = await World.create(srv.store)
        message = await w.post_ask()
        ask_id = message.blocks[0].ask_id  # type: ignore[union-attr]
        await w.store.decline_ask(w.human, ask_id)
        grpc = GrpcClient(srv.grpc_port)
        try:
            history = await grpc.call(
                "GetAskHistory",
                pb.GetAskHistoryRequest(ask_id=ask_id),
                w.tokens[w.human.account_id],
            )
        finally:
            await grpc.close()
    assert [e.receipt for e in history.entries] == ["", ""]


async def test_a_configured_key_folder_without_a_key_stops_the_start(
    database_url: str, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "keys").mkdir()
    with pytest.raises(StartupError, match="holds no key; make one with"):
        async with running_server(database_url, tmp_path, receipt_keys_dir=tmp_path / "keys"):
            pass
