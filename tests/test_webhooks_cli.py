"""`compass-server admin …` for webhooks: the operator registers an endpoint
(its secret printed once), reads its deliveries and attempts, redelivers,
rotates the secret, disables, enables and deletes it; a running server sends
what the commands set up."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook as Verifier
from standardwebhooks.webhooks import WebhookVerificationError

from tests.procs import BIN
from tests.receiver import Receiver

# The fixtures are used by name; ruff reads each test's parameter as redefining them.
from tests.test_webhooks import KEY, hooks, receiver, w  # noqa: F401
from tests.world import World

pytestmark = pytest.mark.timeout(180)

KEYED = {"COMPASS_WEBHOOK_KEY": KEY, "COMPASS_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8"}


def _run(database_url: str, args: tuple[str, ...], env: dict[str, str]) -> Any:
    base = {
        k: v
        for k, v in os.environ.items()
        if k != "COMPASS_DATABASE_URL" and not k.startswith("COMPASS_WEBHOOK")
    }
    return subprocess.run(
        [BIN / "compass-server", "admin", *args, "--database-url", database_url],
        capture_output=True,
        text=True,
        env={**base, **env},
        timeout=60,
        check=False,
    )


async def cli(
    database_url: str, *args: str, ok: bool = True, env: dict[str, str] | None = None
) -> dict[str, Any]:
    out = await asyncio.to_thread(_run, database_url, args, KEYED if env is None else env)
    if not ok:
        assert out.returncode == 1, out
        return json.loads(out.stderr.strip().splitlines()[-1])  # type: ignore[no-any-return]
    assert out.returncode == 0, out.stderr
    (line,) = out.stdout.strip().splitlines()
    return json.loads(line)  # type: ignore[no-any-return]


async def test_the_operator_runs_a_webhook_from_the_command_line(
    hooks: Any,  # noqa: F811
    receiver: Receiver,  # noqa: F811
    w: World,  # noqa: F811
) -> None:
    url = hooks.database_url
    ws = str(w.workspace_id)
    made = await cli(
        url,
        "create-webhook",
        "--workspace",
        ws,
        "--url",
        receiver.url("/in/compass"),
        "--events",
        "ask.posted,ask.answered",
    )
    assert made["secret"].startswith("whsec_")
    assert made["kind"] == "standard" and made["enabled"] is True
    assert made["event_types"] == ["ask.posted", "ask.answered"]
    assert made["url"] == f"http://127.0.0.1:{receiver.port}/in/…"
    hook = made["webhook_id"]
    (listed,) = (await cli(url, "list-webhooks", "--workspace", ws))["webhooks"]
    assert listed["webhook_id"] == hook and "secret" not in listed

    await w.post_ask()
    (first,) = await receiver.wait_for(1)
    assert Verifier(made["secret"]).verify(first.body, first.headers)["type"] == "ask.posted"
    for _ in range(50):
        (delivery,) = (await cli(url, "list-deliveries", "--webhook", hook))["deliveries"]
        if delivery["state"] == "delivered":
            break
        await asyncio.sleep(0.1)
    assert delivery["state"] == "delivered" and delivery["delivery_id"] == first.webhook_id
    shown = await cli(url, "list-attempts", delivery["delivery_id"])
    assert [a["status_code"] for a in shown["attempts"]] == [200]
    assert shown["attempts"][0]["response"] == "ok"
    assert json.loads(shown["body"])["data"]["ask"]["state"] == "open"

    again = await cli(url, "redeliver", delivery["delivery_id"])
    assert again["state"] == "pending"
    second = (await receiver.wait_for(2))[1]
    assert (second.webhook_id, second.body) == (first.webhook_id, first.body)

    rotated = await cli(url, "rotate-webhook-secret", hook, "--grace", "0")
    assert rotated["secret"] != made["secret"] and "previous_secret_until" not in rotated
    await w.post_ask()
    third = (await receiver.wait_for(3))[2]
    Verifier(rotated["secret"]).verify(third.body, third.headers)
    with pytest.raises(WebhookVerificationError):
        Verifier(made["secret"]).verify(third.body, third.headers)

    off = await cli(url, "disable-webhook", hook)
    assert off["enabled"] is False and off["disabled_reason"] == "disabled by an admin"
    on = await cli(url, "enable-webhook", hook)
    assert on["enabled"] is True
    gone = await cli(url, "delete-webhook", hook)
    assert gone == {"webhook_id": hook, "deleted": True}
    assert (await cli(url, "list-webhooks", "--workspace", ws))["webhooks"] == []
    missing = await cli(url, "list-attempts", delivery["delivery_id"], ok=False)
    assert missing["error"] == f"no account, runner, token, webhook or delivery {first.webhook_id}"


async def test_the_commands_refuse_what_the_rpcs_refuse(
    hooks: Any,  # noqa: F811
    w: World,  # noqa: F811
) -> None:
    url, ws = hooks.database_url, str(w.workspace_id)
    private = await cli(
        url,
        "create-webhook",
        "--workspace",
        ws,
        "--url",
        "http://127.0.0.1:9/x",
        ok=False,
        env={"COMPASS_WEBHOOK_KEY": KEY},
    )
    assert "127.0.0.1 is not a public address" in private["error"]
    keyless = await cli(
        url, "create-webhook", "--workspace", ws, "--url", "http://127.0.0.1:9/x", ok=False, env={}
    )
    assert "COMPASS_WEBHOOK_KEY" in keyless["error"]
    bad_type = await cli(
        url,
        "create-webhook",
        "--workspace",
        ws,
        "--url",
        "http://127.0.0.1:9/x",
        "--events",
        "ask.nope",
        ok=False,
    )
    assert "no webhook event type 'ask.nope'" in bad_type["error"]
