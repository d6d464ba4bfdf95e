"""OpenID providers on loopback for the sign-in tests.

`Provider` is built from joserfc's components in a thread: it answers
discovery, its key set, the authorization request (at once, no login page)
and the token request (checking the code and the PKCE verifier), and the
test decides what its next ID token says: who, for which audience, with
which nonce, expiry or key, or with its signature tampered. `rotate()` gives
it a new key, as a provider's key rotation does.

`MockProcess` runs the `oidc-provider-mock` package (a provider with its own
login page) as a process, for the browser test.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _new_key() -> RSAKey:
    key = RSAKey.generate_key(2048, parameters={"kid": secrets.token_hex(8), "alg": "RS256"})
    return key


class Provider:
    def __init__(self, client_id: str = "compass-test") -> None:
        self.client_id = client_id
        self.key = _new_key()
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        # Who the next sign-in is, and anything its ID token should say otherwise.
        self.claims: dict[str, Any] = {}
        self.override: dict[str, Any] = {}
        self.sign_with: RSAKey | None = None
        self.tamper = False
        self.codes: dict[str, dict[str, str]] = {}
        self.jwks_fetches = 0
        self._server: http.server.ThreadingHTTPServer | None = None

    def person(self, sub: str, email: str, verified: bool = True, **claims: Any) -> None:
        self.claims = {"sub": sub, "email": email, "email_verified": verified, **claims}
        self.override = {}
        self.sign_with = None
        self.tamper = False

    def rotate(self) -> None:
        self.key = _new_key()

    def provider_settings(self, workspace: str, domains: list[str], **more: Any) -> dict[str, Any]:
        return {
            "name": "test",
            "label": "Test ID",
            "issuer": self.issuer,
            "client_id": self.client_id,
            "client_secret": "test-secret",
            "workspace": workspace,
            "domains": domains,
            **more,
        }

    def id_token(self, nonce: str) -> str:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": self.client_id,
            "iat": now,
            "exp": now + 300,
            "nonce": nonce,
            **self.claims,
            **self.override,
        }
        key = self.sign_with or self.key
        token = jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)
        if self.tamper:
            head, body, sig = token.split(".")
            payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            payload["email"] = "mallory@acme.test"
            body = base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(b"=").decode()
            token = f"{head}.{body}.{sig}"
        return token

    # --- HTTP ---------------------------------------------------------------------------------

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        provider = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _json(self, body: Any, status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(url.query))
                if url.path == "/.well-known/openid-configuration":
                    base = provider.issuer
                    self._json(
                        {
                            "issuer": base,
                            "authorization_endpoint": f"{base}/authorize",
                            "token_endpoint": f"{base}/token",
                            "jwks_uri": f"{base}/jwks",
                            "id_token_signing_alg_values_supported": ["RS256"],
                        }
                    )
                elif url.path == "/jwks":
                    provider.jwks_fetches += 1
                    self._json(KeySet([provider.key]).as_dict(private=False))
                elif url.path == "/authorize":
                    code = secrets.token_urlsafe(16)
                    provider.codes[code] = query
                    target = (
                        query["redirect_uri"]
                        + "?"
                        + urllib.parse.urlencode({"code": code, "state": query["state"]})
                    )
                    self.send_response(302)
                    self.send_header("location", target)
                    self.send_header("content-length", "0")
                    self.end_headers()
                else:
                    self._json({"error": "not_found"}, 404)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                asked = provider.codes.pop(form.get("code", ""), None)
                verifier = form.get("code_verifier", "")
                challenge = (
                    base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
                    .rstrip(b"=")
                    .decode()
                )
                if (
                    asked is None
                    or asked.get("code_challenge_method") != "S256"
                    or asked.get("code_challenge") != challenge
                ):
                    self._json({"error": "invalid_grant"}, 400)
                    return
                self._json(
                    {
                        "access_token": secrets.token_urlsafe(16),
                        "token_type": "Bearer",
                        "expires_in": 300,
                        "id_token": provider.id_token(asked["nonce"]),
                    }
                )

        return Handler

    def start(self) -> Provider:
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@contextlib.contextmanager
def provider() -> Iterator[Provider]:
    p = Provider().start()
    try:
        yield p
    finally:
        p.stop()


class MockProcess:
    """`python -m oidc_provider_mock` on a free loopback port, nonce required."""

    def __init__(self) -> None:
        self.port = free_port()
        self.issuer = f"http://localhost:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> MockProcess:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "oidc_provider_mock",
                "--port",
                str(self.port),
                "--host",
                "127.0.0.1",
                "--require-nonce",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.issuer}/.well-known/openid-configuration"):
                    return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("oidc-provider-mock did not start")

    def user(self, sub: str, **claims: Any) -> None:
        """What the provider says of `sub` when it signs in."""
        request = urllib.request.Request(
            f"{self.issuer}/users/{urllib.parse.quote(sub)}",
            data=json.dumps(claims).encode(),
            method="PUT",
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request):
            pass

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
            self.proc = None
