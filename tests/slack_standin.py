"""A stand-in for Slack on loopback: its Web API (chat.postMessage,
chat.update, chat.postEphemeral, views.open, users.info) answering as Slack
does — `ok`, `error`, a bot token checked, HTTP 429 with Retry-After when
told to rate limit — and recording every call (listed, for docs/slack.md's
walkthrough, at `<api url>_calls`); and a client that sends interactivity
payloads and slash commands signed as Slack signs them."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import pathlib
import time
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View
from slack_sdk.signature import SignatureVerifier

from tests.receiver import Received, Receiver, Reply

TEAM = "T0COMPASS"
TOKEN = "xoxb-1-test-token"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


@dataclass
class Call:
    method: str
    token: str
    body: dict[str, Any]


@dataclass
class SlackStandIn:
    tokens: set[str] = field(default_factory=lambda: {TOKEN})
    # Tokens Slack has revoked: every call with one answers token_revoked.
    revoked: set[str] = field(default_factory=set)
    # method -> how many of its next calls answer 429 (and after how long to retry).
    limited: collections.Counter[str] = field(default_factory=collections.Counter)
    retry_after: int = 1
    # method -> how many of its next calls answer 503, as Slack in an outage.
    failing: collections.Counter[str] = field(default_factory=collections.Counter)
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    refused: list[Call] = field(default_factory=list)
    receiver: Receiver | None = None
    _ts: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    async def start(self) -> SlackStandIn:
        self.receiver = await Receiver(self._answer).start()
        return self

    async def close(self) -> None:
        if self.receiver is not None:
            await self.receiver.close()

    @property
    def api_url(self) -> str:
        assert self.receiver is not None
        return self.receiver.url("/api/")

    def _answer(self, r: Received) -> Reply:
        method = r.path.removeprefix("/api/")
        token = r.headers.get("authorization", "").removeprefix("Bearer ")
        try:
            body = json.loads(r.body or b"{}")
        except ValueError:
            return _slack({"ok": False, "error": "invalid_json"})
        if method == "_calls":
            # Not Slack's: what Compass called so far, for a walkthrough to read.
            seen = [{"method": c.method, "body": c.body} for c in self.calls]
            return Reply(200, json.dumps(seen).encode(), content_type="application/json")
        call = Call(method, token, body)
        if self.limited[method] > 0:
            self.limited[method] -= 1
            self.refused.append(call)
            return Reply(
                429,
                json.dumps({"ok": False, "error": "ratelimited"}).encode(),
                content_type="application/json",
                headers=(("retry-after", str(self.retry_after)),),
            )
        if self.failing[method] > 0:
            self.failing[method] -= 1
            self.refused.append(call)
            return Reply(503, b"<html>Service Unavailable</html>", content_type="text/html")
        if token in self.revoked:
            self.refused.append(call)
            return _slack({"ok": False, "error": "token_revoked"})
        if token not in self.tokens:
            self.refused.append(call)
            return _slack({"ok": False, "error": "invalid_auth"})
        self.calls.append(call)
        if method == "chat.postMessage":
            return _slack({"ok": True, "channel": body["channel"], "ts": f"{next(self._ts)}.0001"})
        if method in ("chat.update", "chat.postEphemeral", "views.open"):
            return _slack(
                {"ok": True, "channel": body.get("channel", ""), "ts": body.get("ts", "")}
            )
        if method == "users.info":
            user = self.users.get(body.get("user", ""))
            return _slack(
                {"ok": True, "user": user} if user else {"ok": False, "error": "user_not_found"}
            )
        return _slack({"ok": False, "error": "unknown_method"})

    def of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    async def wait(
        self, method: str, n: int = 1, where: Any = None, wait: float = 20.0
    ) -> list[Call]:
        deadline = time.monotonic() + wait
        while True:
            got = [c for c in self.of(method) if where is None or where(c)]
            if len(got) >= n:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(got)} of {n} {method} calls arrived: {got[-3:]}")
            await asyncio.sleep(0.02)


def _slack(body: dict[str, Any]) -> Reply:
    return Reply(200, json.dumps(body).encode(), content_type="application/json")


def checked_message(body: dict[str, Any]) -> dict[str, Any]:
    """A message whose every block Slack's models accept unchanged."""
    assert isinstance(body["text"], str) and 0 < len(body["text"]) <= 3000
    assert 0 < len(body["blocks"]) <= 50
    for raw in body["blocks"]:
        block = Block.parse(raw)
        assert block is not None, raw
        block.validate_json()
        assert block.to_dict() == raw
    return body


def checked_view(view: dict[str, Any]) -> dict[str, Any]:
    parsed = View(**view)
    parsed.validate_json()
    assert parsed.to_dict() == view
    return view


def texts(body: dict[str, Any]) -> list[str]:
    out = []
    for b in body["blocks"]:
        if b["type"] == "section":
            out.append(b["text"]["text"])
        elif b["type"] == "context":
            out.extend(e["text"] for e in b["elements"])
    return out


def buttons(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for b in body["blocks"] if b["type"] == "actions" for e in b["elements"]]


class Slack:
    """Sends interactivity payloads to a server as Slack does: a form with
    one `payload` field, signed with the app's signing secret."""

    def __init__(self, http_port: int, secret: str = SECRET) -> None:
        self.url = f"http://127.0.0.1:{http_port}/slack/interactivity"
        self.secret = secret
        # Generous: under a loaded machine's latency what is tested is the outcome.
        self.client = httpx.AsyncClient(timeout=60.0)
        self._n = itertools.count(1)

    async def close(self) -> None:
        await self.client.aclose()

    async def send(
        self,
        payload: dict[str, Any],
        *,
        secret: str | None = None,
        at: int | None = None,
        signed: bool = True,
    ) -> httpx.Response:
        body = urllib.parse.urlencode({"payload": json.dumps(payload)})
        stamp = str(at if at is not None else int(time.time()))
        headers = {"content-type": "application/x-www-form-urlencoded"}
        if signed:
            verifier = SignatureVerifier(secret or self.secret)
            headers["x-slack-request-timestamp"] = stamp
            headers["x-slack-signature"] = verifier.generate_signature(timestamp=stamp, body=body)
        return await self.client.post(self.url, content=body, headers=headers)

    async def command(
        self, user: str, text: str, *, team: str = TEAM, secret: str | None = None
    ) -> httpx.Response:
        """`/compass TEXT` typed by the user, as Slack posts a slash command."""
        body = urllib.parse.urlencode(
            {
                "token": "deprecated",
                "team_id": team,
                "team_domain": "compass",
                "channel_id": "C1",
                "user_id": user,
                "user_name": user.lower(),
                "command": "/compass",
                "text": text,
                "response_url": "https://hooks.slack.test/commands/1",
                "trigger_id": f"trigger-{next(self._n)}",
            }
        )
        stamp = str(int(time.time()))
        verifier = SignatureVerifier(secret or self.secret)
        return await self.client.post(
            self.url.replace("/interactivity", "/commands"),
            content=body,
            headers={
                "content-type": "application/x-www-form-urlencoded",
                "x-slack-request-timestamp": stamp,
                "x-slack-signature": verifier.generate_signature(timestamp=stamp, body=body),
            },
        )

    def click(self, user: str, button: dict[str, Any], channel: str = "C1") -> dict[str, Any]:
        n = next(self._n)
        return {
            "type": "block_actions",
            "team": {"id": TEAM, "domain": "compass"},
            "user": {"id": user, "team_id": TEAM},
            "api_app_id": "A1",
            "trigger_id": f"trigger-{n}",
            "channel": {"id": channel},
            "container": {"type": "message", "channel_id": channel, "message_ts": "1.0001"},
            "actions": [
                {
                    "type": "button",
                    "action_id": button["action_id"],
                    "block_id": "b",
                    "value": button.get("value", ""),
                    "action_ts": f"{time.time():.6f}-{n}",
                }
            ],
        }

    def submit(self, user: str, view: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
        n = next(self._n)
        return {
            "type": "view_submission",
            "team": {"id": TEAM, "domain": "compass"},
            "user": {"id": user, "team_id": TEAM},
            "api_app_id": "A1",
            "trigger_id": f"trigger-{n}",
            "view": {
                **view,
                "id": f"V{n}",
                "team_id": TEAM,
                "state": {"values": values},
            },
        }


PUBLIC_URL = "https://compass.example.test"


@contextlib.asynccontextmanager
async def slack_server(
    database_url: str, data_dir: pathlib.Path, standin: SlackStandIn, webhook_key: str, **more: Any
) -> AsyncIterator[Any]:
    """A server whose Slack app talks to the stand-in, its deliveries retried fast."""
    from tests.conftest import running_server

    async with running_server(
        database_url,
        data_dir,
        public_url=PUBLIC_URL,
        webhook_key=webhook_key,
        webhook_retry_schedule="0.2s,0.2s,0.2s,0.2s,0.2s,0.2s,0.2s,0.2s",
        webhook_timeout_seconds=3.0,
        webhook_poll_seconds=0.05,
        slack_api_url=standin.api_url,
        **more,
    ) as srv:
        yield srv
