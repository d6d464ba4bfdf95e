"""The receipt keys: Ed25519 keys kept in a folder outside the database.

Each key is one file `<kid>.json` of the folder: `{"signs_from": "<RFC
3339 time>", "jwk": <the private key as a JWK>}`, its kid the key's RFC 7638
thumbprint. Every key of the folder is published (the JWKS); an ending is
signed by the newest key whose `signs_from` is at or before the ending's
time, so a receipt is the same whenever it is read again (Ed25519 signatures
are deterministic), and a key put in place with a later `signs_from` is
published before it signs anything. An ending older than every key is
signed by the oldest. Removing a key's file withdraws it: the endings it
signed are signed by another key from then on, and receipts held from
before no longer verify.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import pathlib
from collections.abc import Sequence
from typing import Any

from joserfc.errors import JoseError
from joserfc.jwk import OKPKey

# The folder the embedded setup keeps beside its database.
KEY_FOLDER = "receipt-keys"
# RFC 9864's fully specified name for EdDSA over Ed25519 ("EdDSA" is deprecated).
ALG = "Ed25519"


class KeyProblem(Exception):
    """The keys can't be read or used; the message says what to fix."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def rfc3339(at: datetime.datetime) -> str:
    """A time in UTC to the microsecond: one text for one instant."""
    return at.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclasses.dataclass(frozen=True)
class ReceiptKey:
    kid: str
    signs_from: datetime.datetime
    key: OKPKey

    def public(self) -> dict[str, Any]:
        return {**self.key.as_dict(private=False), "kid": self.kid, "alg": ALG, "use": "sig"}


def new_key_file(
    folder: pathlib.Path, signs_from: datetime.datetime | None = None
) -> tuple[ReceiptKey, pathlib.Path]:
    """A new key written to the folder (readable by its owner only), signing
    from `signs_from` (default: now)."""
    key = OKPKey.generate_key("Ed25519")
    made = ReceiptKey(key.thumbprint(), signs_from or datetime.datetime.now(datetime.UTC), key)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / f"{made.kid}.json"
    body = {"signs_from": rfc3339(made.signs_from), "jwk": key.as_dict(private=True)}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(body, indent=2) + "\n")
    return made, path


def _read(path: pathlib.Path) -> ReceiptKey:
    what = f"the receipt key file {path}"
    try:
        body = json.loads(path.read_text())
        signs_from = datetime.datetime.fromisoformat(body["signs_from"])
        key = OKPKey.import_key(body["jwk"])
    except OSError as exc:
        raise KeyProblem(f"can't read {what}: {exc.strerror}") from None
    except (ValueError, KeyError, TypeError, JoseError):
        raise KeyProblem(
            f'{what} is not a receipt key: it holds {{"signs_from": "<RFC 3339 time>", '
            '"jwk": <an Ed25519 private JWK>}; make one with `compass-server admin '
            "new-receipt-key`"
        ) from None
    if key.curve_name != "Ed25519" or not key.is_private or signs_from.tzinfo is None:
        raise KeyProblem(
            f"{what} must hold an Ed25519 private key and a signs_from time with its offset"
        )
    return ReceiptKey(key.thumbprint(), signs_from, key)


class ReceiptKeys:
    """The keys of one folder, oldest first."""

    def __init__(self, keys: Sequence[ReceiptKey]) -> None:
        if not keys:
            raise ValueError("no receipt key")
        self.keys = sorted(keys, key=lambda k: (k.signs_from, k.kid))

    @classmethod
    def load(cls, folder: pathlib.Path, *, create: bool = False) -> ReceiptKeys:
        """The folder's keys; with `create`, a first key made there when it
        holds none."""
        if create and not any(folder.glob("*.json")):
            new_key_file(folder)
        if not folder.is_dir():
            raise KeyProblem(f"the receipt key folder {folder} does not exist")
        keys = [_read(path) for path in sorted(folder.glob("*.json"))]
        if not keys:
            raise KeyProblem(
                f"the receipt key folder {folder} holds no key; make one with "
                "`compass-server admin new-receipt-key`"
            )
        return cls(keys)

    def for_ending(self, at: datetime.datetime) -> ReceiptKey:
        """The key that signs an ending at `at`."""
        signing = self.keys[0]
        for key in self.keys:
            if key.signs_from <= at:
                signing = key
        return signing

    def jwks(self) -> dict[str, Any]:
        return {"keys": [k.public() for k in self.keys]}
