"""A client that gets the Connect protocol wrong, the way curl does by
default, gets a Connect error in JSON saying what to send, never a bare
status with no body."""

from __future__ import annotations

from typing import Any

import httpx

from tests.world import World

SERVICE = "compass.v1.CommsService"


def _error(response: httpx.Response, status: int) -> tuple[str, str]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"code", "message"}
    return body["code"], body["message"]


async def test_no_content_type_says_which_to_send(server: Any, api_world: World) -> None:
    token = api_world.tokens[api_world.human.account_id]
    url = f"http://127.0.0.1:{server.http_port}/{SERVICE}/ListChannels"
    async with httpx.AsyncClient(timeout=30) as http:
        bare = await http.post(url, content=b"{}", headers={"authorization": f"Bearer {token}"})
        form = await http.post(url, data={"a": "b"}, headers={"authorization": f"Bearer {token}"})
        fine = await http.post(url, json={}, headers={"authorization": f"Bearer {token}"})
    assert _error(bare, 415) == (
        "invalid_argument",
        f"{SERVICE}/ListChannels takes Content-Type: application/json (Connect JSON) or "
        "application/proto (binary protobuf); this request has none",
    )
    _, message = _error(form, 415)
    assert message.endswith("this request has application/x-www-form-urlencoded")
    assert fine.status_code == 200, fine.text


async def test_a_get_says_to_post(server: Any, api_world: World) -> None:
    url = f"http://127.0.0.1:{server.http_port}/{SERVICE}/PostMessage"
    async with httpx.AsyncClient(timeout=30) as http:
        got = await http.get(url)
    assert _error(got, 405) == (
        "unimplemented",
        f"{SERVICE}/PostMessage takes POST, not GET: send the request message as the body, "
        "with Content-Type: application/json",
    )
    assert got.headers["allow"] == "POST"


async def test_a_misspelt_method_or_service_names_the_nearest(
    server: Any, api_world: World
) -> None:
    base = f"http://127.0.0.1:{server.http_port}"
    async with httpx.AsyncClient(timeout=30) as http:
        method = await http.post(f"{base}/{SERVICE}/ListChanels", json={})
        service = await http.post(f"{base}/compass.v1.CommService/ListChannels", json={})
        page = await http.get(f"{base}/no-such-file.txt")
    assert _error(method, 404) == (
        "unimplemented",
        f"{SERVICE} has no method ListChanels (did you mean ListChannels?)",
    )
    assert _error(service, 404) == (
        "unimplemented",
        "there is no service compass.v1.CommService (did you mean compass.v1.CommsService?)",
    )
    # The page's files are not Connect: a missing one stays a plain 404.
    assert page.status_code == 404 and page.headers["content-type"] == "text/plain"
