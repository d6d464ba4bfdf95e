"""A browser's sign-in, as HTTP: the server's login address, the provider,
the callback; and calls signed in by the session cookie."""

from __future__ import annotations

import contextlib
import json
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import httpx

from tests.conftest import running_server
from tests.oidc import Provider, free_port


@contextlib.asynccontextmanager
async def signin_server(
    database_url: str,
    data_dir: pathlib.Path,
    providers: list[dict[str, Any]],
    **settings: Any,
) -> AsyncIterator[Any]:
    """An in-process server whose page is at a known port (the providers send
    people back to its public URL), with these sign-in providers; settings
    may name the port and public URL themselves."""
    from compass_server.signin.providers import providers as parse

    port = free_port()
    settings.setdefault("http_listen", f"127.0.0.1:{port}")
    settings.setdefault("public_url", f"http://127.0.0.1:{port}")
    async with running_server(
        database_url,
        data_dir,
        signin_providers=parse(providers),
        signin_jwks_refetch_seconds=0.0,
        **settings,
    ) as srv:
        yield srv


class Browser:
    """Cookies and redirects as a browser keeps them, on one server."""

    def __init__(self, server: Any) -> None:
        self.base = f"http://127.0.0.1:{server.http_port}"
        self.http = httpx.AsyncClient(base_url=self.base, timeout=30)

    async def close(self) -> None:
        await self.http.aclose()

    async def sign_in(self, provider: str = "test") -> httpx.Response:
        """Follows the whole round trip; the last response (a 303 home when
        it worked, else the refusal page)."""
        response = await self.http.get(f"/auth/login/{provider}")
        for _ in range(5):
            if response.status_code not in (302, 303):
                return response
            location = response.headers["location"]
            if location.startswith("/"):
                return response
            response = await self.http.get(location)
        return response

    @property
    def session(self) -> str | None:
        return self.http.cookies.get("compass_session")

    async def call(
        self,
        method: str,
        body: dict[str, Any] | None = None,
        *,
        service: str = "compass.v1.IdentityService",
        origin: str | None = "own",
        csrf: bool = True,
    ) -> httpx.Response:
        """A Connect JSON call as the page makes it: the cookie, the page's
        header and its Origin (or another's)."""
        headers = {"content-type": "application/json"}
        if csrf:
            headers["x-compass-csrf"] = "1"
        if origin is not None:
            headers["origin"] = self.base if origin == "own" else origin
        return await self.http.post(
            f"/{service}/{method}", content=json.dumps(body or {}), headers=headers
        )


@contextlib.asynccontextmanager
async def browser(server: Any) -> AsyncIterator[Browser]:
    b = Browser(server)
    try:
        yield b
    finally:
        await b.close()


__all__ = ["Browser", "Provider", "browser", "signin_server"]
