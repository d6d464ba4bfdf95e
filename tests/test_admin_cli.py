"""`compass-server admin …`: the operator's commands run the same AdminApi as
the AdminService, on the database directly, one JSON object per command."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest

from compass_server.store import Store
from tests.procs import BIN

pytestmark = pytest.mark.timeout(180)


def cli(database_url: str, *args: str, ok: bool = True) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "COMPASS_DATABASE_URL"}
    out = subprocess.run(
        [BIN / "compass-server", "admin", *args, "--database-url", database_url],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    if not ok:
        assert out.returncode == 1, out
        return json.loads(out.stderr.strip().splitlines()[-1])  # type: ignore[no-any-return]
    assert out.returncode == 0, out.stderr
    (line,) = out.stdout.strip().splitlines()
    return json.loads(line)  # type: ignore[no-any-return]


def test_every_admin_command_has_a_one_line_help() -> None:
    out = subprocess.run(
        [BIN / "compass-server", "admin", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80"},
        timeout=60,
        check=True,
    ).stdout
    lines = out.splitlines()
    for name in (
        "unassign-agent",
        "reparent-agent",
        "set-role",
        "list-accounts",
        "list-runners",
        "list-tokens",
        "create-token",
        "revoke-token",
        "rotate-token",
        "create-webhook",
        "list-webhooks",
        "disable-webhook",
        "enable-webhook",
        "delete-webhook",
        "rotate-webhook-secret",
        "list-deliveries",
        "list-attempts",
        "redeliver",
    ):
        (at,) = [i for i, line in enumerate(lines) if line.split()[:1] == [name]]
        assert len(lines[at].split()) > 2, lines[at]
        # No continuation line: the description fits on one.
        assert not any(line.startswith("     ") for line in lines[at + 1 : at + 2]), lines[at:]


async def test_the_operator_bootstraps_a_workspace_and_manages_its_tokens(
    database_url: str, store: Store
) -> None:
    ws = cli(database_url, "create-workspace", "acme")["workspace_id"]
    ada = cli(
        database_url, "create-account", "--workspace", ws, "--handle", "ada", "--kind", "human"
    )
    # The workspace's first human is its admin; the next is a member unless named.
    assert ada["role"] == "admin" and ada["kind"] == "human" and ada["token"].startswith("cpa_")
    lin = cli(
        database_url,
        "create-account",
        "--workspace",
        ws,
        "--handle",
        "lin",
        "--kind",
        "human",
        "--label",
        "laptop",
        "--expires-in",
        "30d",
    )
    assert lin["role"] == "member"
    promoted = cli(database_url, "set-role", "--account", lin["account_id"], "--role", "admin")
    assert promoted["role"] == "admin"
    accounts = cli(database_url, "list-accounts", "--workspace", ws)["accounts"]
    assert [(a["handle"], a["role"]) for a in accounts] == [("ada", "admin"), ("lin", "admin")]

    bot = cli(
        database_url,
        "create-account",
        "--workspace",
        ws,
        "--handle",
        "bot",
        "--kind",
        "agent",
        "--owner",
        ada["account_id"],
    )
    runner = cli(database_url, "create-runner", "--workspace", ws, "--name", "box")
    assert runner["token"].startswith("cpr_")
    cli(database_url, "assign-agent", "--runner", runner["runner_id"], "--agent", bot["account_id"])
    (listed,) = cli(database_url, "list-runners", "--workspace", ws)["runners"]
    assert listed["agent_account_ids"] == [bot["account_id"]]
    unassigned = cli(
        database_url,
        "unassign-agent",
        "--runner",
        runner["runner_id"],
        "--agent",
        bot["account_id"],
    )
    assert unassigned == {
        "runner_id": runner["runner_id"],
        "agent_id": bot["account_id"],
        "sessions_unbound": 0,
    }

    extra = cli(database_url, "create-token", "--account", lin["account_id"], "--label", "ci")
    assert extra["label"] == "ci" and extra["token"].startswith("cpa_")
    tokens = cli(database_url, "list-tokens", "--account", lin["account_id"])["tokens"]
    assert [t["label"] for t in tokens] == ["ci", "laptop"]
    assert "expires_at" in tokens[1] and "expires_at" not in tokens[0]
    assert not any("token" in t for t in tokens), "a listing never carries a secret"

    rotated = cli(database_url, "rotate-token", extra["token_id"], "--grace", "1h")
    assert rotated["label"] == "ci" and rotated["token"] != extra["token"]
    assert rotated["old_token"]["replaced_by_token_id"] == rotated["token_id"]
    assert rotated["old_token"]["active"] is True and "expires_at" in rotated["old_token"]
    revoked = cli(database_url, "revoke-token", extra["token_id"])
    assert revoked["active"] is False and "revoked_at" in revoked
    with pytest.raises(Exception, match="revoked"):
        await store.admin.sign_in(extra["token"])
    signed = await store.admin.sign_in(rotated["token"])
    assert str(signed.principal.account_id) == lin["account_id"]  # type: ignore[union-attr]
    everything = cli(database_url, "list-tokens", "--workspace", ws, "--all")["tokens"]
    # ada's, lin's first, its "ci" and that one's rotation, bot's, the runner's.
    assert len(everything) == 6

    # Refusals are one JSON error object on stderr and exit 1.
    err = cli(database_url, "rotate-token", extra["token_id"], ok=False)
    assert "revoked or expired" in err["error"]
    err = cli(database_url, "set-role", "--account", bot["account_id"], "--role", "admin", ok=False)
    assert "always a member" in err["error"]
    err = cli(database_url, "revoke-token", "00000000-0000-0000-0000-000000000000", ok=False)
    assert "no account, runner, token, webhook or delivery" in err["error"]


def test_the_operator_creates_a_subagent_and_moves_it(database_url: str) -> None:
    ws = cli(database_url, "create-workspace", "trees")["workspace_id"]
    ada = cli(
        database_url, "create-account", "--workspace", ws, "--handle", "ada", "--kind", "human"
    )
    scout = cli(
        database_url,
        "create-account",
        *("--workspace", ws, "--handle", "scout", "--kind", "agent", "--owner", ada["account_id"]),
    )
    planner = cli(
        database_url,
        "create-account",
        *("--workspace", ws, "--handle", "planner", "--kind", "agent"),
        *("--parent", scout["account_id"]),
    )
    assert planner["parent_account_id"] == scout["account_id"]
    assert planner["owner_account_id"] == ada["account_id"]
    moved = cli(database_url, "reparent-agent", "--agent", planner["account_id"])
    assert moved["parent_account_id"] == ""
    back = cli(
        database_url,
        "reparent-agent",
        *("--agent", planner["account_id"], "--parent", scout["account_id"]),
    )
    assert back["parent_account_id"] == scout["account_id"]
    accounts = cli(database_url, "list-accounts", "--workspace", ws)["accounts"]
    assert {a["handle"]: a["parent_account_id"] for a in accounts} == {
        "ada": "",
        "scout": "",
        "planner": scout["account_id"],
    }
    err = cli(
        database_url,
        "reparent-agent",
        *("--agent", scout["account_id"], "--parent", planner["account_id"]),
        ok=False,
    )
    assert "own ancestor" in err["error"]
