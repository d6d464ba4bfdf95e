"""`compass-server admin` commands for receipts and the record: a new
receipt key, and checking a workspace's hash-chained history."""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Callable
from typing import Any

from compass_server.cli.admin import Action, Handler
from compass_server.cli.arguments import an_id
from compass_server.config import Settings
from compass_server.receipts.keys import KEY_FOLDER, new_key_file, rfc3339
from compass_server.store import Store
from compass_server.store.history import check_history

ACTIONS = {
    "new-receipt-key": "a new receipt signing key in the key folder; prints its kid",
    "verify-history": "checks a workspace's hash-chained ask history; names what was altered",
}


def _time(text: str) -> datetime.datetime:
    try:
        at = datetime.datetime.fromisoformat(text)
    except ValueError:
        at = None
    if at is None or at.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an RFC 3339 time with its offset, like 2026-05-01T00:00:00Z"
        )
    return at


def add_parsers(action: Action) -> None:
    key = action("new-receipt-key")
    key.add_argument(
        "--signs-from",
        type=_time,
        metavar="TIME",
        help="when it starts signing endings (default: now); every key is published at once, "
        "so a later time lets every server have it before it signs",
    )
    verify = action("verify-history")
    verify.add_argument(
        "--workspace", required=True, type=an_id, metavar="ID", help="the workspace"
    )


def new_receipt_key(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Needs no database: the key folder is the configured one, or the
    embedded setup's under the data dir."""
    folder = settings.receipt_keys_dir or settings.data_dir / KEY_FOLDER
    key, path = new_key_file(folder, args.signs_from)
    return {"kid": key.kid, "file": str(path), "signs_from": rfc3339(key.signs_from)}


async def _verify_history(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    check = await check_history(store.db, args.workspace)
    out: dict[str, Any] = {
        "workspace_id": str(args.workspace),
        "asks": check.asks,
        "entries": check.entries,
        "holds": check.holds,
    }
    if check.altered is not None:
        a = check.altered
        out["first_altered"] = {
            "entry_id": a.entry_id,
            "ask_id": a.ask_id,
            "kind": a.kind,
            "at": rfc3339(a.at) if a.at else None,
            "why": a.why,
        }
    return out


# Settings-only actions: run without opening the database.
LOCAL: dict[str, Callable[[argparse.Namespace, Settings], dict[str, Any]]] = {
    "new-receipt-key": new_receipt_key
}
HANDLERS: dict[str, Handler] = {"verify-history": _verify_history}
