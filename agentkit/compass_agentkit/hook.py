"""compass-hook: a harness's command hook that asks through Compass.

    compass-hook claude-code                 # PermissionRequest / PreToolUse JSON on stdin
    compass-hook codex permission-request    # Codex's PermissionRequest JSON on stdin
    compass-hook codex notify '<json>'       # Codex's notify program: the JSON is the last argument
    compass-hook verify RECEIPTS_FILE        # check the receipts written beside a transcript

It reads the hook's JSON, posts it to the Compass server's hook endpoint
(`--url`, `COMPASS_HOOK_URL`: the server's HTTP address; `--token`,
`COMPASS_HOOK_TOKEN`: a hook token) — the same server path Claude Code's
`http` hooks take — waits, and prints the harness's decision as the server
wrote it. `--timeout` is the hook's own timeout (seconds, default 600, the
harnesses' default): the server answers a little before it. When nobody
decides, or Compass can't be reached, it prints the `--fallback` (`ask`, the
harness's own prompt; or `deny`) and says why in one line on stderr. Ctrl-C
or the harness's kill hangs up, and the server withdraws the ask.

Each decision's signed receipt is written beside the harness's transcript
(`<transcript>.compass-receipts.jsonl`, one JSON line per decision) unless
`--no-receipts`; `compass-hook verify` checks them against the server's keys.
Exit status 0 whenever it printed a decision or a fallback; 1 when it can't
run (a bad flag or input: nothing is decided); `verify` exits 1 when a
receipt doesn't hold.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pathlib
import signal
import sys
import urllib.parse
from collections.abc import Sequence
from typing import Any

import httpx

from compass_agentkit import harness
from compass_agentkit.command import Parser, version
from compass_agentkit.receipts import ReceiptError, fetch_jwks, load_jwks, verify_receipt

__all__ = ["main"]

PROG = "compass-hook"
DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT = 600.0
# A hook's input, at most (the server reads 1 MiB).
MAX_INPUT_BYTES = 1 << 20
# How long before the hook's own timeout this command stops waiting, when
# the server hasn't answered (it answers before its own margin).
OWN_MARGIN_SECONDS = 1.0
RECEIPTS_SUFFIX = ".compass-receipts.jsonl"


def _parser() -> Parser:
    p = Parser(prog=PROG, description="A harness's hook that asks people through Compass.")
    p.add_argument("--version", action="version", version=f"{PROG} {version('compass-agentkit')}")
    sub = p.add_subparsers(dest="harness", required=True, metavar="HARNESS")

    def asking(q: Any) -> None:
        q.add_argument(
            "--url",
            default=os.environ.get("COMPASS_HOOK_URL", DEFAULT_URL),
            metavar="URL",
            help=f"the Compass server's HTTP address (COMPASS_HOOK_URL, default {DEFAULT_URL})",
        )
        q.add_argument(
            "--token",
            default=os.environ.get("COMPASS_HOOK_TOKEN", ""),
            metavar="TOKEN",
            help="a hook token, cph_… (COMPASS_HOOK_TOKEN)",
        )
        q.add_argument(
            "--timeout",
            type=float,
            default=DEFAULT_TIMEOUT,
            metavar="SECONDS",
            help="the hook's own timeout in its settings (default 600)",
        )
        q.add_argument(
            "--fallback",
            choices=harness.FALLBACKS,
            default=harness.FALLBACK_ASK,
            help="when nobody decides: the harness's own prompt (ask, default) or deny",
        )
        q.add_argument(
            "--receipts",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="write each decision's receipt beside the transcript (default: yes)",
        )

    claude = sub.add_parser("claude-code", help="Claude Code's PermissionRequest or PreToolUse")
    asking(claude)
    codex = sub.add_parser("codex", help="Codex's PermissionRequest, or its notify program")
    codex_sub = codex.add_subparsers(dest="event", required=True, metavar="EVENT")
    asking(codex_sub.add_parser("permission-request", help="a PermissionRequest hook"))
    notify = codex_sub.add_parser("notify", help="notify = [...] in config.toml")
    asking(notify)
    notify.add_argument("payload", metavar="JSON", help="the notification, as Codex passes it")
    verify = sub.add_parser("verify", help="check receipts written beside a transcript")
    verify.add_argument("file", type=pathlib.Path, metavar="FILE", help="a …" + RECEIPTS_SUFFIX)
    verify.add_argument(
        "--url",
        default=os.environ.get("COMPASS_HOOK_URL", DEFAULT_URL),
        metavar="URL",
        help="the Compass server whose keys sign (its /.well-known/jwks.json)",
    )
    verify.add_argument("--jwks", type=pathlib.Path, metavar="FILE", help="the keys, from a file")
    return p


def _say(line: str) -> None:
    print(f"{PROG}: {' '.join(line.split())}", file=sys.stderr, flush=True)


def _print(body: bytes) -> None:
    if body:
        sys.stdout.buffer.write(body + (b"" if body.endswith(b"\n") else b"\n"))
        sys.stdout.buffer.flush()


def _event_of(data: object, name: str) -> str:
    if isinstance(data, dict) and isinstance(data.get("hook_event_name"), str):
        return str(data["hook_event_name"])
    return name


def _write_receipt(data: object, response: httpx.Response, name: str) -> None:
    receipt = response.headers.get("compass-receipt", "")
    transcript = data.get("transcript_path") if isinstance(data, dict) else None
    if not receipt or not isinstance(transcript, str) or not transcript:
        return
    line = {
        "ask_id": response.headers.get("compass-ask", ""),
        "harness": name,
        "session_id": data.get("session_id", "") if isinstance(data, dict) else "",
        "tool_name": data.get("tool_name", "") if isinstance(data, dict) else "",
        "decision": json.loads(response.content) if response.content.strip() else None,
        "receipt": receipt,
    }
    path = pathlib.Path(transcript + RECEIPTS_SUFFIX)
    try:
        with path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
    except OSError as exc:
        _say(f"couldn't write the receipt to {path}: {exc.strerror or exc}")


async def _ask(args: Any, name: str, body: bytes, data: object) -> int:
    event = _event_of(data, "")
    url = (
        args.url.rstrip("/")
        + f"/hooks/{name}?"
        + urllib.parse.urlencode({"timeout": f"{args.timeout:g}", "fallback": args.fallback})
    )
    wait = max(1.0, args.timeout - OWN_MARGIN_SECONDS)

    def fallen(why: str) -> int:
        _say(f"{why}; {'denying' if args.fallback == harness.FALLBACK_DENY else 'asking here'}")
        if event:
            _print(harness.fallback(name, event, args.fallback, why))
        return 0

    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(wait, connect=min(wait, 10.0))) as http:
            response = await http.post(
                url,
                content=body,
                headers={
                    "authorization": f"Bearer {args.token}",
                    "content-type": "application/json",
                },
            )
    except httpx.TimeoutException:
        return fallen(f"Compass at {args.url} didn't answer within {wait:g}s")
    except httpx.HTTPError as exc:
        return fallen(f"can't reach Compass at {args.url} ({type(exc).__name__}: {exc})")
    reason = urllib.parse.unquote(response.headers.get("compass-reason", ""))
    if response.status_code != 200:
        try:
            message = str(response.json()["message"])
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {response.status_code}"
        return fallen(f"Compass refused the request ({response.status_code}): {message}")
    if reason:
        _say(reason)
    if args.receipts:
        _write_receipt(data, response, name)
    _print(response.content)
    return 0


def _verify(args: Any) -> int:
    try:
        keys = load_jwks(args.jwks) if args.jwks else fetch_jwks(args.url)
    except (OSError, ValueError) as exc:
        _say(f"can't read the server's keys: {exc}")
        return 1
    try:
        lines = args.file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        _say(f"can't read {args.file}: {exc}")
        return 1
    failed = 0
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
            proof = verify_receipt(str(line["receipt"]), keys)
            if proof.ask_id != line.get("ask_id"):
                raise ReceiptError(f"it is about ask {proof.ask_id}, not {line.get('ask_id')}")
            allowed = _allowed(line.get("decision"))
            if allowed and proof.ending != "answered":
                raise ReceiptError(f"the decision allowed, but the ask was {proof.ending}")
        except (ValueError, KeyError, TypeError) as exc:
            failed += 1
            print(f"line {n}: doesn't hold: {exc}")
            continue
        by = f" by {proof.by_handle}" if proof.by_handle else ""
        print(f"line {n}: {proof.ask_id} {proof.ending}{by} at {proof.at.isoformat()}: holds")
    return 1 if failed else 0


def _allowed(decision: object) -> bool:
    if not isinstance(decision, dict):
        return False
    out = decision.get("hookSpecificOutput", {})
    if not isinstance(out, dict):
        return False
    said = out.get("decision", {})
    return out.get("permissionDecision") == "allow" or (
        isinstance(said, dict) and said.get("behavior") == "allow"
    )


async def _run(args: Any) -> int:
    name = args.harness
    if name == "codex" and args.event == "notify":
        body = args.payload.encode("utf-8", "surrogateescape")
    else:
        body = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    if len(body) > MAX_INPUT_BYTES:
        _say(f"the hook's input is over {MAX_INPUT_BYTES} bytes; nothing was asked")
        return 1
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        _say("the hook's input is not JSON; nothing was asked")
        return 1
    if not args.token:
        _say("no hook token: pass --token or set COMPASS_HOOK_TOKEN")
        return 1
    return await _ask(args, name, body, data)


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.harness == "verify":
        sys.exit(_verify(args))
    loop = asyncio.new_event_loop()
    task = loop.create_task(_run(args))
    stopped: list[int] = []

    def stop(signum: int) -> None:
        # The harness's kill or Ctrl-C: hang up, so the server withdraws the ask.
        stopped.append(signum)
        task.cancel()

    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop, signum)
    try:
        code = loop.run_until_complete(task)
    except asyncio.CancelledError:
        _say("stopped; the ask is withdrawn")
        code = 128 + (stopped[0] if stopped else signal.SIGINT)
    finally:
        loop.close()
    sys.exit(code)
