"""The harnesses' hook output, in their exact JSON: one definition for the
server's /hooks/ endpoints and for `compass-hook`, which prints the same
when it can't reach Compass.

- Claude Code `PermissionRequest`:
  `{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}`
  or `…{"behavior":"deny","message":"…"}`.
- Claude Code `PreToolUse`: `permissionDecision` allow (with `updatedInput`,
  for AskUserQuestion the questions as sent plus `answers`), or deny with
  `permissionDecisionReason`.
- Codex `PermissionRequest`: as Claude Code's (allow, or deny with `message`).
- No decision: Claude Code's `{}` (with a `systemMessage` saying why, when
  there is a why), Codex's empty output; either harness then prompts as it
  would without Compass.

Sources: code.claude.com/docs/en/hooks (decision control, v2.1.2xx) and
developers.openai.com/codex/hooks (0.125+); ../shared/HARNESSES.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CLAUDE_CODE",
    "CODEX",
    "FALLBACKS",
    "FALLBACK_ASK",
    "FALLBACK_DENY",
    "HARNESSES",
    "PERMISSION_REQUEST",
    "PRE_TOOL_USE",
    "allow",
    "deny",
    "fallback",
    "no_decision",
]

CLAUDE_CODE = "claude-code"
CODEX = "codex"
HARNESSES = {CLAUDE_CODE: "Claude Code", CODEX: "Codex"}
PERMISSION_REQUEST = "PermissionRequest"
PRE_TOOL_USE = "PreToolUse"
# When nobody decides: the harness's own prompt, or deny.
FALLBACK_ASK, FALLBACK_DENY = "ask", "deny"
FALLBACKS = (FALLBACK_ASK, FALLBACK_DENY)
# Claude Code caps its output strings at this many characters.
OUTPUT_TEXT_CHARS = 10_000


def dumps(value: object) -> bytes:
    """JSON as the hooks print it: compact, UTF-8."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _clip(text: str) -> str:
    return text if len(text) <= OUTPUT_TEXT_CHARS else text[: OUTPUT_TEXT_CHARS - 1] + "…"


def no_decision(harness: str, why: str = "") -> bytes:
    """The harness prompts as it would without Compass."""
    if harness == CODEX:
        return b""
    return dumps({"systemMessage": _clip(f"Compass: {why}")}) if why else b"{}"


def allow(event: str, updated_input: Mapping[str, Any] | None = None) -> bytes:
    if event == PRE_TOOL_USE:
        out: dict[str, Any] = {"hookEventName": PRE_TOOL_USE, "permissionDecision": "allow"}
        if updated_input is not None:
            out["updatedInput"] = updated_input
        return dumps({"hookSpecificOutput": out})
    return dumps(
        {
            "hookSpecificOutput": {
                "hookEventName": PERMISSION_REQUEST,
                "decision": {"behavior": "allow"},
            }
        }
    )


def deny(event: str, why: str) -> bytes:
    if event == PRE_TOOL_USE:
        out = {
            "hookEventName": PRE_TOOL_USE,
            "permissionDecision": "deny",
            "permissionDecisionReason": _clip(why),
        }
        return dumps({"hookSpecificOutput": out})
    return dumps(
        {
            "hookSpecificOutput": {
                "hookEventName": PERMISSION_REQUEST,
                "decision": {"behavior": "deny", "message": _clip(why)},
            }
        }
    )


def fallback(harness: str, event: str, kind: str, why: str) -> bytes:
    """The configured fallback, saying why it was taken (nothing for an
    event that decides nothing, such as Codex's notify)."""
    if event not in (PERMISSION_REQUEST, PRE_TOOL_USE):
        return b""
    if kind == FALLBACK_DENY:
        return deny(event, f"Compass: {why}")
    return no_decision(harness, why)
