"""Signatures per the Standard Webhooks spec: HMAC-SHA256 over
`<webhook-id>.<webhook-timestamp>.<body>` with the endpoint's secret
(`whsec_` and base64), sent as `v1,<base64>` in `webhook-signature`. After a
rotation both secrets sign, space-separated, so a receiver still holding the
old one keeps verifying until the grace period ends."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Sequence

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def signed_headers(
    msg_id: str, timestamp: int, body: bytes, signing_secrets: Sequence[str]
) -> dict[str, str]:
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(
            signature(s, msg_id, timestamp, body) for s in signing_secrets
        ),
    }
