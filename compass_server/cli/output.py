"""How every command prints: an admin result as one JSON object on stdout,
an error as one JSON object on stderr (exit 1); a usage error is one line
on stderr (exit 2), from the parser."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

_ENUM_PREFIX = re.compile(r"^(PRINCIPAL_KIND|WORKSPACE_ROLE|WEBHOOK_KIND|WEBHOOK_DELIVERY_STATE)_")


def plain(message: Message) -> dict[str, Any]:
    """A response as a command prints it: proto field names, and enums by
    the short lower-case names the flags take (human, admin, runner)."""
    out = json_format.MessageToDict(
        message, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
    )
    for key in ("kind", "role", "state"):
        if isinstance(out.get(key), str):
            out[key] = _ENUM_PREFIX.sub("", out[key]).lower()
    return out


def result(found: dict[str, Any]) -> int:
    """Prints what a command found; a check that found something wrong (a
    result with holds false) fails, after saying what it found."""
    print(json.dumps(found))
    return 0 if found.get("holds", True) else 1


def error(message: str) -> int:
    print(json.dumps({"error": message}), file=sys.stderr)
    return 1


def said(prog: str, message: str, status: int = 2) -> int:
    """serve's and config's way: one line on stderr."""
    print(f"{prog}: {message}", file=sys.stderr)
    return status
