"""A push service on loopback, as a browser's would be: it keeps a browser's
subscription keys (a P-256 key pair and an auth secret), decrypts what the
server pushes (RFC 8291, aes128gcm) and verifies the VAPID JWT (RFC 8292)
against the key the server publishes."""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from typing import Any

import http_ece
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from tests.receiver import Received


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Browser:
    """One browser's subscription: what PushSubscription.toJSON() gives."""

    endpoint: str
    private: ec.EllipticCurvePrivateKey
    auth: bytes

    @classmethod
    def new(cls, endpoint: str) -> Browser:
        return cls(endpoint, ec.generate_private_key(ec.SECP256R1()), os.urandom(16))

    @property
    def p256dh(self) -> str:
        return b64(
            self.private.public_key().public_bytes(
                serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
            )
        )

    def decrypt(self, body: bytes) -> dict[str, Any]:
        plain = http_ece.decrypt(
            body, private_key=self.private, auth_secret=self.auth, version="aes128gcm"
        )
        return json.loads(plain)  # type: ignore[no-any-return]


def verify_vapid(got: Received, server_key: str) -> dict[str, Any]:
    """The JWT's claims once its ES256 signature verifies with `server_key`
    (the VAPID public key) and the header names that key; AssertionError else."""
    scheme, _, params = got.headers["authorization"].partition(" ")
    assert scheme == "vapid", got.headers["authorization"]
    fields = dict(p.strip().split("=", 1) for p in params.split(","))
    assert fields["k"] == server_key
    head, claims, sig = fields["t"].split(".")
    assert json.loads(unb64(head)) == {"typ": "JWT", "alg": "ES256"}
    raw = unb64(sig)
    assert len(raw) == 64
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64(server_key))
    try:
        public.verify(
            encode_dss_signature(int.from_bytes(raw[:32]), int.from_bytes(raw[32:])),
            f"{head}.{claims}".encode(),
            ec.ECDSA(hashes.SHA256()),
        )
    except InvalidSignature:
        raise AssertionError("the VAPID signature doesn't verify") from None
    return json.loads(unb64(claims))  # type: ignore[no-any-return]
