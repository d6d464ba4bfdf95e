"""Calls to Slack's Web API: a JSON POST with the bot token, and Slack's
answer read the way Slack documents it (`ok`, `error`, and HTTP 429 with
Retry-After when rate limited)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import httpx

# Retry-After past this is taken as this: a delivery is not parked for hours.
LONGEST_WAIT = 300.0


@dataclasses.dataclass
class SlackFailed(Exception):
    """Slack refused or could not be reached; `error` is Slack's code (or ours)."""

    error: str
    status_code: int | None = None
    retry_after: float | None = None

    def __str__(self) -> str:
        return self.error


class SlackWeb:
    def __init__(self, base_url: str, timeout: float) -> None:
        self.base_url = base_url.rstrip("/") + "/"
        self.timeout = timeout
        self._client = httpx.AsyncClient(timeout=timeout, follow_redirects=False)

    async def close(self) -> None:
        await self._client.aclose()

    async def call(self, method: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        """Slack's answer when `ok`; SlackFailed otherwise."""
        try:
            r = await self._client.post(
                self.base_url + method,
                json=body,
                headers={"authorization": f"Bearer {token}"},
            )
        except httpx.TimeoutException:
            raise SlackFailed(f"{method}: Slack didn't answer in {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise SlackFailed(f"{method}: can't reach Slack ({type(exc).__name__})") from None
        if r.status_code == 429:
            try:
                wait = float(r.headers.get("retry-after", "1"))
            except ValueError:
                wait = 1.0
            raise SlackFailed("ratelimited", 429, min(max(wait, 0.0), LONGEST_WAIT))
        if r.status_code >= 300:
            raise SlackFailed(f"{method}: Slack answered HTTP {r.status_code}", r.status_code)
        try:
            answer = r.json()
        except ValueError:
            raise SlackFailed(f"{method}: Slack's answer isn't JSON", r.status_code) from None
        if not isinstance(answer, dict):
            raise SlackFailed(f"{method}: Slack's answer isn't an object", r.status_code)
        if not answer.get("ok"):
            raise SlackFailed(f"{method}: {answer.get('error') or 'not ok'}", r.status_code)
        return answer


def took_ms(since: float) -> float:
    return (time.monotonic() - since) * 1000.0
