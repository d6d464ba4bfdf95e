"""`compass-server serve` as a newcomer runs it: no database settings, an
embedded PostgreSQL under the data dir, admin commands beside it."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import httpx
import pytest

BIN = pathlib.Path(sys.executable).parent


def admin(data_dir: pathlib.Path, *args: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "COMPASS_DATABASE_URL"}
    out = subprocess.run(
        [BIN / "compass-server", "admin", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def connect_json(port: int, method: str, body: dict[str, object], token: str) -> httpx.Response:
    return httpx.post(
        f"http://127.0.0.1:{port}/compass.v1.CommsService/{method}",
        json=body,
        headers={"authorization": f"Bearer {token}"},
        timeout=30,
    )


@pytest.mark.timeout(240)
def test_serve_on_embedded_postgres_then_post_and_answer_over_connect_json(
    tmp_path: pathlib.Path,
) -> None:
    data_dir = tmp_path / "compass-data"
    env = {k: v for k, v in os.environ.items() if k != "COMPASS_DATABASE_URL"}
    proc = subprocess.Popen(
        [
            BIN / "compass-server",
            "serve",
            "--data-dir",
            str(data_dir),
            "--grpc-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        ready = json.loads(line)
        port = ready["http_port"]
        ws = admin(data_dir, "create-workspace", "acme")["workspace_id"]
        human = admin(
            data_dir, "create-account", "--workspace", ws, "--handle", "ada", "--kind", "human"
        )
        agent = admin(
            data_dir,
            "create-account",
            "--workspace",
            ws,
            "--handle",
            "scout",
            "--kind",
            "agent",
            "--owner",
            human["account_id"],
        )
        runner = admin(data_dir, "create-runner", "--workspace", ws, "--name", "laptop")
        assigned = admin(
            data_dir,
            "assign-agent",
            "--runner",
            runner["runner_id"],
            "--agent",
            agent["account_id"],
        )
        assert assigned == {"runner_id": runner["runner_id"], "agent_id": agent["account_id"]}

        channel = connect_json(
            port,
            "CreateChannel",
            {"name": "general", "memberAccountIds": [agent["account_id"]]},
            human["token"],
        ).json()["channel"]
        posted = connect_json(
            port,
            "PostMessage",
            {
                "channelId": channel["channelId"],
                "blocks": [
                    {
                        "ask": {
                            "questions": [
                                {
                                    "questionId": "go",
                                    "question": "Ship it?",
                                    "options": [
                                        {"id": "y", "label": "Yes"},
                                        {"id": "n", "label": "No"},
                                    ],
                                }
                            ]
                        }
                    }
                ],
            },
            agent["token"],
        )
        assert posted.status_code == 200, posted.text
        ask_id = posted.json()["message"]["blocks"][0]["ask"]["askId"]
        answered = connect_json(
            port,
            "RespondToAsk",
            {
                "askId": ask_id,
                "answers": [{"questionId": "go", "chosenOptionIds": ["y"]}],
            },
            human["token"],
        )
        assert answered.status_code == 200, answered.text
        assert answered.json()["askMessage"]["blocks"][0]["ask"]["answered"] is True
        again = connect_json(
            port,
            "RespondToAsk",
            {
                "askId": ask_id,
                "answers": [{"questionId": "go", "chosenOptionIds": ["y"]}],
            },
            human["token"],
        )
        assert again.status_code == 409 and again.json()["code"] == "already_exists"
        anon = httpx.post(
            f"http://127.0.0.1:{port}/compass.v1.CommsService/ListChannels", json={}, timeout=10
        )
        assert anon.status_code == 401 and anon.json()["code"] == "unauthenticated"
        page = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
        assert page.status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        err = proc.stderr.read() if proc.stderr else ""
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    assert code == 0, err
    assert "listening" in err and "stopped" in err
    # The embedded database stopped with the server.
    deadline = time.monotonic() + 10
    while (data_dir / "pg" / "postmaster.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (data_dir / "pg" / "postmaster.pid").exists()
