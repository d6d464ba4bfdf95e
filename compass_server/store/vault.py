"""Sealing webhook URLs and signing secrets with the operator's key.

AES-256-GCM, each value bound to its endpoint's id (a sealed value copied to
another endpoint doesn't open) and tagged with the key's fingerprint, so a
server holding another key says so instead of failing obscurely. The key is
32 random bytes in URL-safe base64: `COMPASS_WEBHOOK_KEY`, or the file named
by `COMPASS_WEBHOOK_KEY_FILE`, or, for the embedded database only, a file
under the data dir made on first use.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import pathlib
import secrets
import uuid

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

# The key file the embedded setup keeps beside its database.
KEY_FILE = "webhook.key"
_VERSION = b"\x01"
_NONCE = 12
_FINGERPRINT = 4


class KeyProblem(Exception):
    """The key can't be read or used; the message says what to fix."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def new_key() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()


def parse_key(text: str, where: str) -> bytes:
    try:
        key = base64.urlsafe_b64decode(text.strip().encode() + b"==")
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != 32:
        raise KeyProblem(
            f"{where} is not a webhook key: it must be 32 bytes in URL-safe base64 "
            '(make one with: python3 -c "import base64,secrets; '
            'print(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())")'
        )
    return key


def key_from_file(path: pathlib.Path, *, create: bool) -> bytes:
    """The key in `path`; with `create`, a new one written there (readable by
    its owner only) when the file doesn't exist yet."""
    if create and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process made it first: read theirs
        else:
            with os.fdopen(fd, "w") as f:
                f.write(new_key() + "\n")
    try:
        text = path.read_text()
    except OSError as exc:
        raise KeyProblem(f"can't read the webhook key file {path}: {exc.strerror}") from None
    return parse_key(text, f"the webhook key file {path}")


class Vault:
    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)
        self.fingerprint = hashlib.sha256(b"compass webhook key\x00" + key).digest()[:_FINGERPRINT]

    def seal(self, value: str, owner: uuid.UUID) -> bytes:
        nonce = secrets.token_bytes(_NONCE)
        sealed = self._aead.encrypt(nonce, value.encode(), owner.bytes)
        return _VERSION + self.fingerprint + nonce + sealed

    def open(self, sealed: bytes, owner: uuid.UUID) -> str:
        head = len(_VERSION) + _FINGERPRINT
        if sealed[:1] != _VERSION or len(sealed) < head + _NONCE:
            raise KeyProblem("a sealed webhook value is malformed")
        if sealed[1:head] != self.fingerprint:
            raise KeyProblem(
                "this server's webhook key is not the one the endpoint was sealed with; "
                "give every server the same COMPASS_WEBHOOK_KEY"
            )
        nonce, body = sealed[head : head + _NONCE], sealed[head + _NONCE :]
        try:
            return self._aead.decrypt(nonce, body, owner.bytes).decode()
        except InvalidTag:
            raise KeyProblem("a sealed webhook value doesn't open with this server's key") from None
