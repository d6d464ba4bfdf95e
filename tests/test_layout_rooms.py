"""The code's rooms: one module per stored noun behind one Store, and no
module pair that imports each other's package both ways where it was cut."""

from __future__ import annotations

import ast
import pathlib

import pytest

from compass_server.store import Store

ROOT = pathlib.Path(__file__).resolve().parents[1] / "compass_server"


@pytest.mark.parametrize(
    ("method", "room"),
    [
        ("create_workspace", "accounts"),
        ("get_accounts", "accounts"),
        ("create_channel", "channels"),
        ("participation", "channels"),
        ("list_messages", "messages"),
        ("search_messages", "messages"),
        ("get_ask", "messages"),
        ("post", "posts"),
        ("append_message", "posts"),
        ("set_status", "presence"),
        ("get_presence", "presence"),
        ("bind_session", "sessions"),
        ("heartbeat", "sessions"),
        ("read_events", "events"),
        ("last_event_id", "events"),
    ],
)
def test_each_noun_is_stored_in_its_own_room(method: str, room: str) -> None:
    assert getattr(Store, method).__module__ == f"compass_server.store.{room}"


def _imports(folder: pathlib.Path) -> set[str]:
    found: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
    return found


def test_transport_does_not_import_the_configuration() -> None:
    # config.py reads the transport's defaults; the other way round was a cycle.
    assert not {m for m in _imports(ROOT / "transport") if m.startswith("compass_server.config")}


# What each room may import of the others (CONTRIBUTING.md explains why). The
# store is the floor: it imports the rules it keeps in Python, never a surface.
MAY_IMPORT: dict[str, set[str]] = {
    "store": {"hooks", "inbox", "notify", "telemetry", "webhooks"},
    "asks": {"store"},
    "events": {"store"},
    "inbox": {"store"},
    "receipts": {"store"},
    "signin": {"store"},
    "telemetry": {"store"},
    "notify": {"receipts", "store", "webhooks"},
    "webhooks": {"notify", "receipts", "store"},
    "api": {"events", "hooks", "inbox", "notify", "receipts", "store", "webhooks"},
    "hooks": {"api", "events", "receipts", "store"},
    "relay": {"api", "events", "receipts", "store", "telemetry"},
    "transport": {"api", "events", "hooks", "signin", "store", "telemetry"},
    "slack": {"api", "notify", "signin", "store", "transport", "webhooks"},
    "mail": {"api", "notify", "store", "transport"},
    "cli": {"api", "app", "config", "receipts", "startup", "store", "telemetry"},
}


@pytest.mark.parametrize("room", sorted(MAY_IMPORT))
def test_each_room_imports_only_the_rooms_it_may(room: str) -> None:
    used = {
        m.split(".")[1]
        for m in _imports(ROOT / room)
        if m.startswith("compass_server.") and m.split(".")[1] != room
    }
    assert used <= MAY_IMPORT[room], used - MAY_IMPORT[room]


def test_every_room_has_its_rule() -> None:
    rooms = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()} - {"web"}
    assert rooms == set(MAY_IMPORT)
