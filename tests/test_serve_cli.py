"""`compass-server serve` as a newcomer runs it: no database settings, an
embedded PostgreSQL under the data dir, admin commands beside it."""

from __future__ import annotations

import ipaddress
import json
import os
import pathlib
import signal
import socket
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
    assert out.stderr == ""  # one JSON object on stdout and nothing else
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
    # Not inherited from this process: the server must quiet gRPC's fork warning itself.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("COMPASS_DATABASE_URL", "GRPC_ENABLE_FORK_SUPPORT")
    }
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
    # Stopping the embedded database forks pg_ctl: gRPC says nothing about it.
    assert "fork" not in err, err
    # The embedded database's own chatter stays below the default log level.
    assert "You can now start the database server" not in err
    assert "PostmasterInfo" not in err and "pg_ctl" not in err
    # The embedded database stopped with the server.
    deadline = time.monotonic() + 10
    while (data_dir / "pg" / "postmaster.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (data_dir / "pg" / "postmaster.pid").exists()


# --- start-up failures, help and addresses ---------------------------------------


def cli(
    *args: str, cwd: pathlib.Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("COMPASS_DATABASE_URL", "COMPASS_DATA_DIR", "COMPASS_LOG_LEVEL")
    }
    return subprocess.run(
        [BIN / "compass-server", *args],
        capture_output=True,
        text=True,
        env={**base, **env},
        cwd=cwd,
        timeout=90,
        check=False,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_help_describes_every_admin_command_and_the_default_addresses() -> None:
    admin_help = cli("admin", "--help")
    assert admin_help.returncode == 0, admin_help.stderr
    for command in ("create-workspace", "create-account", "create-runner", "assign-agent"):
        [line] = [ln for ln in admin_help.stdout.splitlines() if ln.strip().startswith(command)]
        assert len(line.split()) > 2, f"{command} has no description: {line!r}"
    serve_help = " ".join(cli("serve", "--help").stdout.split())
    assert "127.0.0.1:50051" in serve_help and "127.0.0.1:8080" in serve_help
    assert "./.compass" in serve_help


def test_an_unreachable_database_is_one_clear_line(tmp_path: pathlib.Path) -> None:
    url = f"postgresql://compass:s3cret@127.0.0.1:{free_port()}/compass"
    served = cli("serve", "--database-url", url, "--grpc-listen", "0", "--http-listen", "0")
    assert served.returncode == 2, served.stderr
    [line] = served.stderr.strip().splitlines()
    assert "Traceback" not in line and "s3cret" not in line
    assert "postgresql://compass:***@127.0.0.1" in line and "--database-url" in line
    assert "refused" in line.lower()
    # The admin commands say the same as their one JSON error object.
    admin_run = cli("admin", "create-workspace", "acme", "--database-url", url)
    assert admin_run.returncode == 1 and admin_run.stdout == ""
    error = json.loads(admin_run.stderr)
    assert list(error) == ["error"]
    assert "compass:***@127.0.0.1" in error["error"] and "s3cret" not in error["error"]


@pytest.mark.parametrize("flag", ["--grpc-listen", "--http-listen"])
def test_a_port_in_use_names_the_address_and_its_flag(database_url: str, flag: str) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        other = "--http-listen" if flag == "--grpc-listen" else "--grpc-listen"
        # A bare port means 127.0.0.1: that is where it collides.
        served = cli("serve", "--database-url", database_url, flag, str(port), other, "0")
    assert served.returncode == 2, served.stderr
    assert "Traceback" not in served.stderr
    line = served.stderr.strip().splitlines()[-1]
    assert f"127.0.0.1:{port}" in line and flag in line and "in use" in line


def test_admin_never_creates_an_embedded_database(tmp_path: pathlib.Path) -> None:
    run = cli("admin", "create-workspace", "acme", cwd=tmp_path)
    assert run.returncode == 1 and run.stdout == ""
    error = json.loads(run.stderr)["error"]
    assert str(tmp_path / ".compass") in error
    assert "--data-dir" in error and "--database-url" in error
    assert not (tmp_path / ".compass").exists()


def listening_hosts(port: int) -> set[str]:
    """The local addresses listening on `port`, from /proc/net/tcp{,6}."""
    hosts: set[str] = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for row in pathlib.Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, port_hex = local.split(":")
            if state != "0A" or int(port_hex, 16) != port:
                continue
            raw = bytes.fromhex(address)
            if width == 8:
                hosts.add(str(ipaddress.IPv4Address(raw[::-1])))
            else:
                v6 = ipaddress.IPv6Address(b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4)))
                hosts.add(str(v6.ipv4_mapped or v6))
    return hosts


@pytest.mark.skipif(not pathlib.Path("/proc/net/tcp").exists(), reason="reads /proc/net/tcp")
async def test_a_bare_port_listens_on_loopback_only(
    database_url: str, tmp_path: pathlib.Path
) -> None:
    from compass_server.app import CompassServer, Settings

    server = CompassServer(
        Settings(database_url=database_url, data_dir=tmp_path, grpc_listen="0", http_listen="0")
    )
    await server.start()
    try:
        assert listening_hosts(server.grpc_port) == {"127.0.0.1"}
        assert listening_hosts(server.http_port) == {"127.0.0.1"}
    finally:
        await server.stop(0)
