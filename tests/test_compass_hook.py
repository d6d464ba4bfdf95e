"""compass-hook, the kit's command hook, run as the harness runs it (the
recorded JSON on stdin) against a real server: what it prints, byte for
byte, the receipt it writes beside the transcript, `verify`, a kill that
withdraws, and Compass out of reach."""

from __future__ import annotations

import asyncio
import json
import pathlib
import signal
import socket
import sys
from typing import Any

import pytest

from compass_server.store.types import Answer, EndingKind
from tests.test_hooks import (
    ALLOWED,
    CODEX,
    NOTIFY,
    PERMISSION,
    QUESTIONS,
    denied,
    hook_token,
    the_open_ask,
    until,
)
from tests.world import World

pytestmark = pytest.mark.timeout(120)

HOOK = str(pathlib.Path(sys.executable).parent / "compass-hook")


async def run(
    args: list[str], stdin: bytes = b"", env: dict[str, str] | None = None
) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        HOOK,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
    )
    assert proc.stdin is not None
    proc.stdin.write(stdin)
    await proc.stdin.drain()
    proc.stdin.close()
    return proc


async def finished(proc: asyncio.subprocess.Process) -> tuple[int, bytes, bytes]:
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out, err


def env_for(server: Any, token: str) -> dict[str, str]:
    return {"COMPASS_HOOK_URL": f"http://127.0.0.1:{server.http_port}", "COMPASS_HOOK_TOKEN": token}


async def test_claude_code_permission_then_verify(
    server: Any, api_world: World, tmp_path: pathlib.Path
) -> None:
    w = api_world
    token = await hook_token(w)
    transcript = tmp_path / "abc123.jsonl"
    request = {**PERMISSION, "transcript_path": str(transcript)}
    proc = await run(["claude-code"], json.dumps(request).encode(), env_for(server, token))
    ask = await the_open_ask(w)
    await w.store.answer(w.human, ask.ask_id, [Answer("decision", ("allow",))])
    code, out, err = await finished(proc)
    assert (code, out, err) == (0, ALLOWED + b"\n", b"")
    receipts = pathlib.Path(str(transcript) + ".compass-receipts.jsonl")
    (line,) = [json.loads(x) for x in (await asyncio.to_thread(receipts.read_text)).splitlines()]
    assert line["ask_id"] == ask.ask_id
    assert line["decision"] == json.loads(ALLOWED)
    verified = await run(["verify", str(receipts), "--url", f"http://127.0.0.1:{server.http_port}"])
    code, out, err = await finished(verified)
    assert code == 0, err
    assert out.decode().startswith(f"line 1: {ask.ask_id} answered by ada at ")
    assert out.decode().endswith(": holds\n")
    # A receipt that claims another decision than it signs doesn't hold.
    forged = {**line, "ask_id": "ask_other"}
    await asyncio.to_thread(receipts.write_text, json.dumps(forged) + "\n")
    code, out, _ = await finished(
        await run(["verify", str(receipts), "--url", f"http://127.0.0.1:{server.http_port}"])
    )
    assert code == 1
    assert out == f"line 1: doesn't hold: it is about ask {ask.ask_id}, not ask_other\n".encode()


async def test_ask_user_question_and_codex(server: Any, api_world: World) -> None:
    w = api_world
    token = await hook_token(w)
    proc = await run(
        ["claude-code", "--no-receipts"], json.dumps(QUESTIONS).encode(), env_for(server, token)
    )
    ask = await the_open_ask(w)
    await w.store.answer(w.human, ask.ask_id, [Answer("1", ("1",)), Answer("2", ("2",))])
    code, out, _ = await finished(proc)
    assert code == 0
    assert json.loads(out)["hookSpecificOutput"]["updatedInput"]["answers"] == {
        "Which database should the service use?": "SQLite",
        "Which clients ship first?": "TypeScript",
    }
    proc = await run(
        ["codex", "permission-request", "--no-receipts"],
        json.dumps(CODEX).encode(),
        env_for(server, token),
    )
    ask = await the_open_ask(w)
    await w.store.answer(w.human, ask.ask_id, [Answer("decision", ("deny",), "keep it")])
    assert await finished(proc) == (0, denied("Denied by @ada: keep it") + b"\n", b"")
    proc = await run(["codex", "notify", json.dumps(NOTIFY)], b"", env_for(server, token))
    assert await finished(proc) == (0, b"", b"")


async def test_a_kill_withdraws_the_ask(server: Any, api_world: World) -> None:
    w = api_world
    token = await hook_token(w)
    for signum in (signal.SIGTERM, signal.SIGINT):
        proc = await run(["claude-code"], json.dumps(PERMISSION).encode(), env_for(server, token))
        ask = await the_open_ask(w)
        proc.send_signal(signum)
        code, out, err = await finished(proc)
        assert (code, out, err) == (
            128 + signum,
            b"",
            b"compass-hook: stopped; the ask is withdrawn\n",
        )

        async def withdrawn(ask_id: str = ask.ask_id) -> bool:
            _, now = await w.store.get_ask(w.human, ask_id)
            return now.ending is not None and now.ending.kind is EndingKind.WITHDRAWN_BY_AGENT

        await until(withdrawn, "the ask withdrawn")


async def test_compass_out_of_reach_falls_back(api_world: World) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"COMPASS_HOOK_URL": f"http://127.0.0.1:{port}", "COMPASS_HOOK_TOKEN": "cph_x"}
    code, out, err = await finished(
        await run(["claude-code", "--fallback", "deny"], json.dumps(PERMISSION).encode(), env)
    )
    assert code == 0
    why = (
        f"can't reach Compass at http://127.0.0.1:{port} "
        "(ConnectError: All connection attempts failed)"
    )
    assert out == denied(f"Compass: {why}") + b"\n"
    assert err == f"compass-hook: {why}; denying\n".encode()
    code, out, err = await finished(
        await run(["claude-code"], json.dumps(PERMISSION).encode(), env)
    )
    assert (
        out
        == json.dumps({"systemMessage": f"Compass: {why}"}, separators=(",", ":")).encode() + b"\n"
    )
    # A refused token: the harness's own prompt, and why.
    code, out, err = await finished(
        await run(["codex", "permission-request"], json.dumps(CODEX).encode(), env)
    )
    assert (code, out) == (0, b"")
    # Input that is no JSON asks nothing.
    code, out, err = await finished(await run(["claude-code"], b"\xff{", env))
    assert (code, out, err) == (
        1,
        b"",
        b"compass-hook: the hook's input is not JSON; nothing was asked\n",
    )


async def test_a_refused_token_says_why(server: Any, api_world: World) -> None:
    env = {
        "COMPASS_HOOK_URL": f"http://127.0.0.1:{server.http_port}",
        "COMPASS_HOOK_TOKEN": "cph_stale",
    }
    code, out, err = await finished(
        await run(["claude-code"], json.dumps(PERMISSION).encode(), env)
    )
    why = "Compass refused the request (401): the token is not valid"
    assert (code, err) == (0, f"compass-hook: {why}; asking here\n".encode())
    assert (
        out
        == json.dumps({"systemMessage": f"Compass: {why}"}, separators=(",", ":")).encode() + b"\n"
    )
