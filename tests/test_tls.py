"""TLS on every port with certificates made by trustme, reloaded on SIGHUP
without dropping open connections; the relay listener that requires runners'
client certificates; real clients: grpc, Connect over HTTPS with httpx, the
agent kit's relay client and compass-mcp."""

from __future__ import annotations

import asyncio
import json
import logging
import pathlib
import signal
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiosmtplib
import grpc
import httpx
import pytest
import trustme
from grpc_health.v1 import health_pb2, health_pb2_grpc

from compass.v1 import admin_pb2
from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_agentkit.relay import Relay, tls_credentials
from compass_server.store import Database, Store
from tests.conftest import running_server
from tests.relay_client import runner_for
from tests.servers import serve_process, stop_process
from tests.world import World

BIN = pathlib.Path(sys.executable).parent
# A new channel makes its own connection: grpc shares them between channels otherwise.
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


@dataclass
class Pki:
    folder: pathlib.Path
    ca: trustme.CA
    other_ca: trustme.CA
    runners_ca: trustme.CA

    def path(self, name: str) -> pathlib.Path:
        return self.folder / name

    def pem(self, name: str) -> bytes:
        return self.path(name).read_bytes()


def write_leaf(leaf: trustme.LeafCert, cert: pathlib.Path, key: pathlib.Path) -> None:
    cert.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    key.write_bytes(leaf.private_key_pem.bytes())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    folder = tmp_path_factory.mktemp("pki")
    p = Pki(folder, trustme.CA(), trustme.CA(), trustme.CA())
    p.ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    p.other_ca.cert_pem.write_to_path(str(folder / "other-ca.pem"))
    p.runners_ca.cert_pem.write_to_path(str(folder / "runners-ca.pem"))
    write_leaf(p.ca.issue_cert("127.0.0.1", "localhost"), folder / "server.pem", folder / "key.pem")
    write_leaf(
        p.other_ca.issue_cert("127.0.0.1", "localhost"),
        folder / "server2.pem",
        folder / "key2.pem",
    )
    write_leaf(
        p.runners_ca.issue_cert("runner-1"), folder / "runner.pem", folder / "runner-key.pem"
    )
    write_leaf(
        p.other_ca.issue_cert("intruder"), folder / "intruder.pem", folder / "intruder-key.pem"
    )
    return p


def tls_settings(p: Pki, cert: str = "server.pem", key: str = "key.pem") -> dict[str, Any]:
    return {"tls_cert": p.path(cert), "tls_key": p.path(key)}


def grpc_channel(port: int, ca: bytes, **kw: bytes) -> grpc.aio.Channel:
    credentials = grpc.ssl_channel_credentials(root_certificates=ca, **kw)
    return grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials, options=OWN_CONNECTION)


async def who_am_i(channel: grpc.aio.Channel, token: str) -> admin_pb2.WhoAmIResponse:
    rpc = channel.unary_unary(
        "/compass.v1.IdentityService/WhoAmI",
        request_serializer=admin_pb2.WhoAmIRequest.SerializeToString,
        response_deserializer=admin_pb2.WhoAmIResponse.FromString,
    )
    reply: admin_pb2.WhoAmIResponse = await rpc(
        admin_pb2.WhoAmIRequest(), metadata=[("authorization", f"Bearer {token}")], timeout=10
    )
    return reply


async def serving(channel: grpc.aio.Channel) -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
    return int(reply.status)


def https(ca: pathlib.Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca))


async def a_world(database_url: str) -> World:
    db = Database(database_url, min_size=1, max_size=2)
    await db.open()
    try:
        return await World.create(Store(db))
    finally:
        await db.close()


# --- both ports -----------------------------------------------------------------------


async def test_grpc_and_connect_over_tls(
    database_url: str, tmp_path: pathlib.Path, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with running_server(database_url, tmp_path, **tls_settings(pki)) as srv:
        world = await World.create(srv.store)
        token = world.tokens[world.human.account_id]
        async with grpc_channel(srv.grpc_port, pki.pem("ca.pem")) as channel:
            me = await who_am_i(channel, token)
            assert me.account.account_id == str(world.human.account_id)
            assert await serving(channel) == health_pb2.HealthCheckResponse.SERVING
        # Plain text to a TLS port gets nowhere.
        async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as plain:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await who_am_i(plain, token)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        # A client that trusts another CA refuses the server.
        async with grpc_channel(srv.grpc_port, pki.pem("other-ca.pem")) as wrong:
            with pytest.raises(grpc.aio.AioRpcError):
                await who_am_i(wrong, token)

        async with httpx.AsyncClient(verify=https(pki.path("ca.pem"))) as http:
            listed = await http.post(
                f"https://127.0.0.1:{srv.http_port}/compass.v1.CommsService/ListChannels",
                json={},
                headers={"authorization": f"Bearer {token}"},
            )
            assert listed.status_code == 200, listed.text
            assert listed.json()["channels"][0]["name"] == "general"
            page = await http.get(f"https://127.0.0.1:{srv.http_port}/")
            assert page.status_code == 200 and "<html" in page.text.lower()
            ready = await http.get(f"https://127.0.0.1:{srv.http_port}/readyz")
            assert ready.status_code == 200
        async with httpx.AsyncClient() as http:
            with pytest.raises(httpx.HTTPError):
                await http.get(f"http://127.0.0.1:{srv.http_port}/healthz", timeout=5)
    assert "without TLS" not in caplog.text


async def test_the_mail_listener_offers_starttls_with_the_server_s_certificate(
    database_url: str, tmp_path: pathlib.Path, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    """A relay delivering replies upgrades the SMTP session with STARTTLS and
    checks the same certificate the other ports present. A client whose
    handshake fails is let go without a traceback in the log."""
    caplog.set_level(logging.INFO)
    async with running_server(
        database_url,
        tmp_path,
        **tls_settings(pki),
        mail_reply_domain="reply.example.test",
        mail_listen="127.0.0.1:0",
    ) as srv:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.mail_port)
        await reader.readline()
        writer.write(b"EHLO careless\r\nSTARTTLS\r\n")
        while not (await reader.readline()).startswith(b"220 "):
            pass
        writer.write(b"not a TLS hello\x00\xff" * 20)
        assert await asyncio.wait_for(reader.read(), 10) == b""  # hung up on
        writer.close()
        smtp = aiosmtplib.SMTP(
            hostname="127.0.0.1",
            port=srv.mail_port,
            start_tls=False,
            tls_context=https(pki.path("ca.pem")),
            timeout=30,
        )
        await smtp.connect()
        await smtp.ehlo()
        assert smtp.supports_extension("starttls")
        await smtp.starttls()
        assert smtp.get_transport_info("sslcontext") is not None
        assert smtp.get_transport_info("peercert") is not None
        await smtp.ehlo()
        assert not smtp.supports_extension("starttls")
        await smtp.mail("someone@example.test")
        with pytest.raises(aiosmtplib.SMTPRecipientRefused) as refused:
            await smtp.rcpt("ask+aaaaaaaaaaaaaaaaaaaaaaaa@reply.example.test")
        assert refused.value.code == 550
        await smtp.quit()
    told = [r for r in caplog.records if r.name.startswith(("mail.log", "compass_server.mail"))]
    assert [r for r in told if r.levelno >= logging.ERROR or r.exc_info] == []
    assert any("STARTTLS" in r.getMessage() for r in told), [r.getMessage() for r in told]


async def test_plain_text_beyond_loopback_warns(
    database_url: str, tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with running_server(database_url, tmp_path, grpc_listen="0.0.0.0:0"):
        pass
    warned = [r for r in caplog.records if "without TLS" in r.getMessage()]
    assert len(warned) == 1 and "--grpc-listen" in warned[0].getMessage()
    caplog.clear()
    async with running_server(database_url, tmp_path):
        pass
    assert "without TLS" not in caplog.text


# --- reload ---------------------------------------------------------------------------


async def first_event(stream: Any) -> pb.Event:
    return await asyncio.wait_for(anext(stream), 30)


async def post(channel: grpc.aio.Channel, world: World, text: str) -> None:
    rpc = channel.unary_unary(
        "/compass.v1.CommsService/PostMessage",
        request_serializer=pb.PostMessageRequest.SerializeToString,
        response_deserializer=pb.PostMessageResponse.FromString,
    )
    await rpc(
        pb.PostMessageRequest(
            channel_id=str(world.channel.channel_id),
            blocks=[pb.MessageBlock(text=pb.TextBlock(text=text))],
        ),
        metadata=[("authorization", f"Bearer {world.tokens[world.agent.account_id]}")],
        timeout=10,
    )


def serve_tls(database_url: str, cert: pathlib.Path, key: pathlib.Path) -> subprocess.Popen[str]:
    return serve_process(database_url, "--tls-cert", str(cert), "--tls-key", str(key))


async def test_sighup_reloads_the_certificate_and_open_connections_stay(
    database_url: str, tmp_path: pathlib.Path, pki: Pki
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_bytes(pki.pem("server.pem"))
    key.write_bytes(pki.pem("key.pem"))
    proc = serve_tls(database_url, cert, key)
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        grpc_port, http_port = ready["grpc_port"], ready["http_port"]
        world = await a_world(database_url)
        human = world.tokens[world.human.account_id]
        old = grpc_channel(grpc_port, pki.pem("ca.pem"))
        subscribe = old.unary_stream(
            "/compass.v1.CommsService/Subscribe",
            request_serializer=pb.SubscribeRequest.SerializeToString,
            response_deserializer=pb.Event.FromString,
        )
        stream = subscribe(pb.SubscribeRequest(), metadata=[("authorization", f"Bearer {human}")])
        events = stream.__aiter__()
        kept_http = httpx.AsyncClient(
            verify=https(pki.path("ca.pem")),
            base_url=f"https://127.0.0.1:{http_port}",
            headers={"authorization": f"Bearer {human}"},
        )
        listed = "/compass.v1.CommsService/ListChannels"
        assert (await kept_http.post(listed, json={})).status_code == 200
        await post(old, world, "before")

        async def until_text(text: str) -> None:
            while True:
                event = await first_event(events)
                blocks = event.message_posted.message.blocks
                if blocks and blocks[0].text.text == text:
                    return

        await until_text("before")

        # New files from another CA, then SIGHUP. The kept HTTP connection is
        # used just before, so that it is not closed as idle meanwhile.
        cert.write_bytes(pki.pem("server2.pem"))
        key.write_bytes(pki.pem("key2.pem"))
        assert (await kept_http.post(listed, json={})).status_code == 200
        proc.send_signal(signal.SIGHUP)
        await asyncio.sleep(1.0)

        # The open HTTP connection goes on (a new one would fail to verify).
        assert (await kept_http.post(listed, json={})).status_code == 200
        await kept_http.aclose()
        # So does the open stream: it hears a message posted after the reload.
        await post(old, world, "after")
        await until_text("after")

        # A new connection sees the new certificate: the old CA no longer verifies it.
        async with grpc_channel(grpc_port, pki.pem("ca.pem")) as stale:
            with pytest.raises(grpc.aio.AioRpcError):
                await who_am_i(stale, human)
        async with grpc_channel(grpc_port, pki.pem("other-ca.pem")) as fresh:
            me = await who_am_i(fresh, human)
            assert me.account.account_id == str(world.human.account_id)
        async with httpx.AsyncClient(verify=https(pki.path("other-ca.pem"))) as http:
            assert (await http.get(f"https://127.0.0.1:{http_port}/healthz")).status_code == 200
        async with httpx.AsyncClient(verify=https(pki.path("ca.pem"))) as http:
            with pytest.raises(httpx.ConnectError):
                await http.get(f"https://127.0.0.1:{http_port}/healthz")

        # A reload with a broken file keeps the certificate in use.
        key.write_bytes(b"not a key")
        proc.send_signal(signal.SIGHUP)
        await asyncio.sleep(1.0)
        async with grpc_channel(grpc_port, pki.pem("other-ca.pem")) as still:
            assert (await who_am_i(still, human)).account.account_id
        stream.cancel()
        await old.close()
    finally:
        code, err = stop_process(proc)
    assert code == 0, err
    assert err.count("reloaded the TLS certificate") == 1
    assert "TLS reload failed" in err


# --- the relay listener with client certificates ---------------------------------------


@pytest.fixture
async def mtls_server(database_url: str, tmp_path: pathlib.Path, pki: Pki) -> AsyncIterator[Any]:
    async with running_server(
        database_url,
        tmp_path,
        relay_listen="127.0.0.1:0",
        tls_client_ca=pki.path("runners-ca.pem"),
        **tls_settings(pki),
    ) as srv:
        yield srv


async def test_the_relay_listener_requires_a_runners_client_certificate(
    mtls_server: Any, pki: Pki
) -> None:
    srv = mtls_server
    world = await World.create(srv.store)
    token = await runner_for(world)
    relay = Relay(
        f"127.0.0.1:{srv.relay_port}",
        token,
        credentials=tls_credentials(
            str(pki.path("ca.pem")), str(pki.path("runner.pem")), str(pki.path("runner-key.pem"))
        ),
    )
    await relay.start()
    try:
        session = await asyncio.wait_for(relay.bind(str(world.agent.account_id), _ignore), 15)
        result = await relay.call(
            session.session_id,
            gw.CommsCallRequest(list_channels=pb.ListChannelsRequest()),
        )
        assert [c.name for c in result.list_channels.channels] == ["general"]
    finally:
        await relay.close()

    # Without a client certificate, or with one of another CA, the handshake fails.
    for kw in (
        {},
        {"private_key": pki.pem("intruder-key.pem"), "certificate_chain": pki.pem("intruder.pem")},
    ):
        async with grpc_channel(srv.relay_port, pki.pem("ca.pem"), **kw) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await serving(channel)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    # The relay is served there alone: the other ports don't serve it.
    async with grpc_channel(srv.grpc_port, pki.pem("ca.pem")) as channel:
        relay_rpc = channel.stream_stream("/compass.v1.AgentGatewayService/Relay")
        call = relay_rpc(metadata=[("authorization", f"Bearer {token}")])
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await call.read()
        assert missing.value.code() == grpc.StatusCode.UNIMPLEMENTED
    async with httpx.AsyncClient(verify=https(pki.path("ca.pem"))) as http:
        gone = await http.post(
            f"https://127.0.0.1:{srv.http_port}/compass.v1.AgentGatewayService/Relay",
            content=b"",
            headers={"content-type": "application/connect+proto"},
        )
        assert gone.status_code in (404, 405)  # no Connect service there: the page's files


async def _ignore(event: pb.Event) -> None:
    return None


async def test_compass_mcp_over_the_mutual_tls_relay(
    mtls_server: Any, pki: Pki, tmp_path: pathlib.Path
) -> None:
    from tests.test_mcp_server import env_for, over_stdio, text_of

    srv = mtls_server
    world = await World.create(srv.store)
    token = await runner_for(world)
    env = env_for(
        srv.relay_port,
        token,
        world,
        COMPASS_URL=f"https://127.0.0.1:{srv.relay_port}",
        COMPASS_CA_CERT=str(pki.path("ca.pem")),
        COMPASS_CLIENT_CERT=str(pki.path("runner.pem")),
        COMPASS_CLIENT_KEY=str(pki.path("runner-key.pem")),
    )
    with (tmp_path / "mcp.log").open("w") as errlog:
        async with over_stdio(env, errlog) as session:
            result = await session.call_tool("list_channels", {})
            assert not result.is_error, text_of(result)
            assert "general" in text_of(result)


def test_the_kit_commands_refuse_half_a_client_certificate(pki: Pki) -> None:
    for command in ("compass-runner", "compass-mcp"):
        run = subprocess.run(
            [
                BIN / command,
                "--token",
                "t",
                "--agent",
                "a",
                "--client-cert",
                str(pki.path("runner.pem")),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert run.returncode == 2, run.stderr
        assert "key" in run.stderr.strip().splitlines()[-1]
