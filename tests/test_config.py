"""The configuration file: one TOML file with every setting, environment
variables over it and flags over those; `config check` prints the effective
configuration with secrets masked; a bad file stops the server in one line."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import tomllib

import httpx
import pytest
import trustme

from compass_server import config
from tests.servers import CallError, GrpcClient

ROOT = pathlib.Path(__file__).resolve().parents[1]
BIN = pathlib.Path(sys.executable).parent


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("COMPASS_")}
    return subprocess.run(
        [BIN / "compass-server", *args],
        capture_output=True,
        text=True,
        env={**base, **env},
        timeout=90,
        check=False,
    )


def check(*args: str, **env: str) -> dict[str, object]:
    run = cli("config", "check", *args, **env)
    assert run.returncode == 0, run.stderr
    return tomllib.loads(run.stdout)


def one_line_failure(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert "Traceback" not in run.stderr
    return lines[0]


def test_file_then_environment_then_flags(tmp_path: pathlib.Path) -> None:
    file = tmp_path / "compass.toml"
    file.write_text(
        'grpc_listen = "127.0.0.1:6001"\n'
        'http_listen = "127.0.0.1:6002"\n'
        "[limits]\n"
        "relay_window = 10\n"
        "subscribe_streams_per_account = 3\n"
        "slow_stream_seconds = 7.5\n"
    )
    only_file = check("--config", str(file))
    assert only_file["grpc_listen"] == "127.0.0.1:6001"
    limits = only_file["limits"]
    assert isinstance(limits, dict)
    assert limits["relay_window"] == 10 and limits["slow_stream_seconds"] == 7.5
    # Untouched settings show their defaults.
    assert limits["relay_sessions_per_stream"] == 100

    # The environment beats the file; COMPASS_CONFIG names the file too.
    env = check(COMPASS_CONFIG=str(file), COMPASS_RELAY_WINDOW="20", COMPASS_GRPC_LISTEN="6101")
    assert env["limits"]["relay_window"] == 20  # type: ignore[index]
    assert env["grpc_listen"] == "6101"
    assert env["limits"]["subscribe_streams_per_account"] == 3  # type: ignore[index]

    # A flag beats both.
    flags = check("--config", str(file), "--relay-window", "30", COMPASS_RELAY_WINDOW="20")
    assert flags["limits"]["relay_window"] == 30  # type: ignore[index]

    # Each value says where it came from.
    text = cli("config", "check", "--config", str(file), "--relay-window", "30").stdout
    [window] = [ln for ln in text.splitlines() if ln.startswith("relay_window ")]
    assert "--relay-window" in window
    [streams] = [ln for ln in text.splitlines() if ln.startswith("subscribe_streams_per_account")]
    assert str(file) in streams
    [sessions] = [ln for ln in text.splitlines() if ln.startswith("relay_sessions_per_stream")]
    assert "default" in sessions


def test_secrets_are_masked(tmp_path: pathlib.Path) -> None:
    file = tmp_path / "compass.toml"
    file.write_text(
        "[database]\n"
        'url = "postgresql://compass:s3cret-pw@db.internal:5432/compass"\n'
        "[tracing]\n"
        'otlp_endpoint = "http://127.0.0.1:4317"\n'
        'otlp_headers = "authorization=Bearer otlp-s3cret"\n'
        "[smtp]\n"
        'host = "mail.internal"\n'
        'username = "compass"\n'
        'password = "smtp-s3cret"\n'
    )
    run = cli("config", "check", "--config", str(file))
    assert run.returncode == 0, run.stderr
    assert "s3cret" not in run.stdout and "s3cret" not in run.stderr
    shown = tomllib.loads(run.stdout)
    assert shown["database"]["url"] == "postgresql://compass:***@db.internal:5432/compass"  # type: ignore[index]
    assert shown["tracing"]["otlp_headers"] == "***"  # type: ignore[index]
    assert shown["smtp"]["password"] == "***"  # type: ignore[index]
    assert shown["smtp"]["username"] == "compass"  # type: ignore[index]
    # So is a password given as a query parameter, from the environment.
    env = cli("config", "check", COMPASS_DATABASE_URL="postgresql://db/compass?password=hunter2")
    assert "hunter2" not in env.stdout and "password=***" in env.stdout


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[limits]\nrelay_windw = 5\n", "limits.relay_windw"),
        ("[limit]\nrelay_window = 5\n", "[limit]"),
        ("grpc_listen = 50051\n", "grpc_listen"),
        ('[limits]\nrelay_window = "many"\n', "limits.relay_window"),
        ("[limits]\nrelay_window = 0\n", "limits.relay_window"),
        ("[limits]\nslow_stream_seconds = -1\n", "limits.slow_stream_seconds"),
        ('[log]\nformat = "xml"\n', "log.format"),
        ("[log]\naccess = 3\n", "log.access"),
        ('grpc_listen = "127.0.0.1:99999"\n', "grpc_listen"),
        ("[limits\n", "line 1"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_key(
    tmp_path: pathlib.Path, text: str, named: str
) -> None:
    file = tmp_path / "compass.toml"
    file.write_text(text)
    line = one_line_failure(cli("config", "check", "--config", str(file)))
    assert line.startswith("compass-server: ") and named in line and str(file) in line
    # serve refuses the same file the same way, before it starts anything.
    served = cli("serve", "--config", str(file), "--grpc-listen", "0", "--http-listen", "0")
    assert one_line_failure(served) == line


def test_an_unknown_key_suggests_the_near_one(tmp_path: pathlib.Path) -> None:
    file = tmp_path / "compass.toml"
    file.write_text("[limits]\nrelay_windw = 5\n")
    line = one_line_failure(cli("config", "check", "--config", str(file)))
    assert "limits.relay_window" in line


def test_bad_environment_and_flag_values_name_their_source(tmp_path: pathlib.Path) -> None:
    line = one_line_failure(cli("config", "check", COMPASS_RELAY_WINDOW="lots"))
    assert "COMPASS_RELAY_WINDOW" in line and "lots" in line
    line = one_line_failure(cli("config", "check", "--relay-window", "-3"))
    assert "--relay-window" in line and "-3" in line
    line = one_line_failure(cli("config", "check", COMPASS_LOG_FORMAT="xml"))
    assert "COMPASS_LOG_FORMAT" in line and "json" in line
    missing = one_line_failure(cli("config", "check", "--config", str(tmp_path / "nope.toml")))
    assert "nope.toml" in missing


def test_tls_needs_a_certificate_and_its_key(tmp_path: pathlib.Path) -> None:
    line = one_line_failure(cli("config", "check", "--tls-cert", str(tmp_path / "c.pem")))
    assert "tls.key" in line
    line = one_line_failure(
        cli(
            "config",
            "check",
            "--tls-cert",
            str(tmp_path / "c.pem"),
            "--tls-key",
            str(tmp_path / "k.pem"),
        )
    )
    assert "c.pem" in line


def test_tls_errors_name_the_setting_and_where_it_came_from(tmp_path: pathlib.Path) -> None:
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    line = one_line_failure(cli("config", "check", "--tls-cert", str(cert)))
    assert line == (
        "compass-server: TLS takes a certificate and its key: tls.cert (from --tls-cert) is "
        "set, tls.key is not"
    )
    line = one_line_failure(
        cli("config", "check", "--tls-key", str(key), COMPASS_TLS_CERT=str(cert))
    )
    assert line == (
        f"compass-server: tls.cert (from COMPASS_TLS_CERT): can't read the TLS file {cert}: "
        "no such file"
    )
    # Two halves of different pairs: one from the file, one from the environment.
    ca = trustme.CA()
    ca.issue_cert("a.example").cert_chain_pems[0].write_to_path(str(cert))
    ca.issue_cert("b.example").private_key_pem.write_to_path(str(key))
    file = tmp_path / "compass.toml"
    file.write_text(f'[tls]\ncert = "{cert}"\n')
    line = one_line_failure(cli("config", "check", "--config", str(file), COMPASS_TLS_KEY=str(key)))
    assert line == (
        f"compass-server: tls.cert (from {file}) {cert} and tls.key (from COMPASS_TLS_KEY) "
        f"{key} don't load as a certificate and its key (SSLError)"
    )


def test_an_unknown_compass_variable_warns_naming_the_nearest_known_one() -> None:
    run = cli(
        "config",
        "check",
        COMPASS_RELAY_WINDW="5",
        COMPASS_FLAVOUR="mint",
        # Read by the kit and by the tests: known, no warning.
        COMPASS_RUNNER_TOKEN="t",
        COMPASS_TEST_DATABASE_URL="postgresql://x",
    )
    assert run.returncode == 0, run.stderr
    warnings = [line.split(" compass_server: ", 1)[1] for line in run.stderr.splitlines()]
    assert warnings == [
        "COMPASS_FLAVOUR is not a variable Compass reads; it is ignored",
        "COMPASS_RELAY_WINDW is not a variable Compass reads (did you mean COMPASS_RELAY_WINDOW?)",
    ]
    # Ignored, as it says.
    assert tomllib.loads(run.stdout)["limits"]["relay_window"] != 5


def test_every_setting_has_a_key_an_environment_variable_a_flag_and_help() -> None:
    seen_keys: set[str] = set()
    for s in config.SETTINGS:
        assert s.key not in seen_keys
        seen_keys.add(s.key)
        assert s.env == "COMPASS_" + s.name.upper()
        assert s.flag == "--" + s.name.replace("_", "-")
        assert s.help and not s.help.endswith(".")
    # Every field of Settings but the process's own id is a setting.
    names = {f.name for f in dataclasses.fields(config.Settings)} - {"server_id"}
    assert names == {s.name for s in config.SETTINGS}


def test_the_operating_docs_list_every_setting() -> None:
    page = (ROOT / "docs" / "operating.md").read_text()
    table = config.markdown_table()
    assert table in page, "docs/operating.md's settings table is stale; paste:\n" + table


def test_every_limit_the_docs_name_as_a_setting_is_one() -> None:
    page = (ROOT / "docs" / "database.md").read_text()
    limits = page.split("## Limits", 1)[1].split("\n## ", 1)[0]
    for s in config.SETTINGS:
        if s.section == "limits":
            assert f"`{s.name.upper()}`" in limits, s.name


async def test_a_file_reaches_the_running_server(database_url: str, tmp_path: pathlib.Path) -> None:
    """A limit set only in the file is the one a client meets."""
    from compass.v1 import comms_pb2 as pb
    from compass_server.store import Database, Store
    from tests.procs import ServerProcess
    from tests.world import World

    file = tmp_path / "compass.toml"
    file.write_text('[limits]\nsubscribe_streams_per_account = 1\n[log]\nformat = "json"\n')
    proc = ServerProcess(
        database_url, env={"COMPASS_CONFIG": str(file), "COMPASS_LOG_LEVEL": "INFO"}
    ).start()
    db = Database(database_url, min_size=1, max_size=2)
    await db.open()
    client = GrpcClient(proc.grpc_port)
    try:
        world = await World.create(Store(db))
        token = world.tokens[world.human.account_id]
        first = client.stream("Subscribe", pb.SubscribeRequest(), token)
        second = client.stream("Subscribe", pb.SubscribeRequest(), token)
        first_task = asyncio.ensure_future(anext(first))
        await asyncio.sleep(0.5)
        with pytest.raises(CallError) as refused:
            await anext(second)
        assert refused.value.code == "resource_exhausted"
        assert "1 Subscribe streams" in refused.value.message
        first_task.cancel()
        async with httpx.AsyncClient() as http:
            alive = await http.get(f"http://127.0.0.1:{proc.http_port}/healthz", timeout=10)
        assert alive.status_code == 200
    finally:
        await client.close()
        await db.close()
        assert proc.stop() == 0
    # The file's log format is the one the process wrote.
    records = [json.loads(line) for line in proc.log if line.strip()]
    assert records and all("level" in r and "message" in r for r in records)
