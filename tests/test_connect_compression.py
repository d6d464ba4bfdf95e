"""Connect responses are compressed only when they are worth it: a small
answer goes as it is, whatever the client accepts; one past the minimum goes
gzipped to a client that accepts gzip, and as it is to one that doesn't."""

from __future__ import annotations

import gzip
import json
import pathlib
from typing import Any

import httpx

from compass_server.transport.connect_app import COMPRESS_MIN_BYTES
from tests.conftest import running_server
from tests.world import World


async def _raw(
    port: int, w: World, method: str, body: dict[str, Any], accept: str | None
) -> tuple[str | None, bytes]:
    """The response's content-encoding and its bytes as sent."""
    headers = {
        "content-type": "application/json",
        "authorization": f"Bearer {w.tokens[w.human.account_id]}",
    }
    if accept is not None:
        headers["accept-encoding"] = accept
    async with (
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http,
        http.stream(
            "POST", f"/compass.v1.CommsService/{method}", json=body, headers=headers
        ) as res,
    ):
        assert res.status_code == 200
        raw = b"".join([chunk async for chunk in res.aiter_raw()])
        return res.headers.get("content-encoding"), raw


def _decoded(encoding: str | None, raw: bytes) -> Any:
    return json.loads(gzip.decompress(raw) if encoding == "gzip" else raw)


async def test_a_small_answer_goes_uncompressed_to_a_client_that_accepts_gzip(
    server: Any, api_world: World
) -> None:
    encoding, raw = await _raw(server.http_port, api_world, "ListChannels", {}, "gzip")
    assert encoding in (None, "identity")
    assert len(raw) < COMPRESS_MIN_BYTES
    assert [c["name"] for c in json.loads(raw)["channels"]] == ["general"]


async def test_an_answer_past_the_minimum_goes_gzipped_only_to_who_accepts_it(
    server: Any, api_world: World
) -> None:
    w = api_world
    for i in range(20):
        await w.post_text(w.human, f"message {i} " + "words " * 20)
    page = {"channelId": str(w.channel.channel_id)}
    encoding, raw = await _raw(server.http_port, w, "ListMessages", page, "br, gzip")
    assert encoding == "gzip"
    gzipped = _decoded(encoding, raw)
    assert len(gzipped["messages"]) == 20
    assert len(raw) < len(json.dumps(gzipped))

    for accept in ("", "identity", "br", "gzip;q=0"):
        encoding, raw = await _raw(server.http_port, w, "ListMessages", page, accept)
        assert encoding in (None, "identity"), accept
        assert json.loads(raw) == gzipped


async def test_the_minimum_is_a_setting(
    database_url: str, tmp_path: pathlib.Path, api_world: World
) -> None:
    async with running_server(database_url, tmp_path, connect_compress_min_bytes=0) as srv:
        encoding, raw = await _raw(srv.http_port, api_world, "ListChannels", {}, "gzip")
    assert encoding == "gzip"
    assert [c["name"] for c in _decoded(encoding, raw)["channels"]] == ["general"]
