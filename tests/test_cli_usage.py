"""What each command line says to a person who typed it wrong: one line
naming what is wrong and the command's --help, an unknown option with the
nearest known one, and help that exits 0. Each runs the real command."""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
BIN = pathlib.Path(sys.executable).parent


def _run(
    *argv: str | os.PathLike[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "100", **(env or {})},
    )


# --- dev.py ------------------------------------------------------------------------


def test_dev_help_exits_0_and_lists_the_commands() -> None:
    for flag in ("--help", "-h"):
        done = _run(sys.executable, ROOT / "dev.py", flag)
        assert done.returncode == 0, done.stderr
        for command in ("test", "serve", "gen", "check-contract", "gates"):
            assert f"  {command}" in done.stdout


def test_dev_names_an_unknown_command_in_one_line() -> None:
    done = _run(sys.executable, ROOT / "dev.py", "tset")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        "dev.py: unknown command 'tset' (did you mean test?); see python3 dev.py --help\n"
    )


def test_dev_without_a_command_says_so() -> None:
    done = _run(sys.executable, ROOT / "dev.py")
    assert done.returncode == 2
    assert done.stderr == "dev.py: no command given; see python3 dev.py --help\n"


# --- compass-server, compass-runner, compass-mcp ----------------------------------------

SERVER = BIN / "compass-server"
RUNNER = BIN / "compass-runner"
MCP = BIN / "compass-mcp"
NO_ID = "00000000-0000-0000-0000-000000000000"


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_an_unknown_option_is_named_with_the_nearest_known_one() -> None:
    # --handle is required and missing too: the misspelling is what is reported.
    line = _one_line(_run(SERVER, "admin", "create-account", "--handel", "ada", "--kind", "human"))
    assert line == (
        "compass-server admin create-account: --handel: unknown option (did you mean "
        "--handle?); see compass-server admin create-account --help"
    )
    line = _one_line(_run(SERVER, "serve", "--grpc-listn", "0"))
    assert line == (
        "compass-server serve: --grpc-listn: unknown option (did you mean --grpc-listen?); "
        "see compass-server serve --help"
    )
    # Before a subcommand, or where argparse would take the next word for one.
    assert _one_line(_run(SERVER, "--verison")) == (
        "compass-server: --verison: unknown option (did you mean --version?); "
        "see compass-server --help"
    )
    assert _one_line(_run(SERVER, "admin", "--workspace", NO_ID)) == (
        "compass-server admin: --workspace: unknown option; see compass-server admin --help"
    )
    assert _one_line(_run(SERVER, "admni", "list-accounts", "--workspace", NO_ID)) == (
        "compass-server: COMMAND: unknown 'admni' (did you mean admin?); see compass-server --help"
    )
    assert _one_line(_run(RUNNER, "--agnt", "a", "--token", "t")) == (
        "compass-runner: --agnt: unknown option (did you mean --agent?); see compass-runner --help"
    )
    assert _one_line(_run(MCP, "--tokn", "t", "--agent", "a")) == (
        "compass-mcp: --tokn: unknown option (did you mean --token?); see compass-mcp --help"
    )


def test_a_missing_option_or_a_bad_value_is_one_line_naming_it() -> None:
    line = _one_line(_run(SERVER, "admin", "create-account", "--workspace", NO_ID))
    assert line == (
        "compass-server admin create-account: the following arguments are required: "
        "--handle, --kind; see compass-server admin create-account --help"
    )
    line = _one_line(_run(SERVER, "admin", "revoke-token", "nope"))
    assert line.startswith("compass-server admin revoke-token: argument TOKEN_ID: 'nope' is not")
    line = _one_line(_run(SERVER, "admin", "create-acount"))
    assert line == (
        "compass-server admin: ACTION: unknown 'create-acount' (did you mean create-account?); "
        "see compass-server admin --help"
    )
    line = _one_line(_run(SERVER, "admin", "create-account", "--kind", "robot"))
    assert "--kind: 'robot' is not one of human, agent" in line
    line = _one_line(_run(RUNNER, "--agent", "a", "--token", "t", "--url", "nowhere"))
    assert line == (
        "compass-runner: 'nowhere' is not HOST:PORT (the Compass server's gRPC address); "
        "see compass-runner --help"
    )


def test_help_and_version_exit_0() -> None:
    for command in (SERVER, RUNNER, MCP):
        done = _run(command, "--help")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"usage: {command.name}")
    assert _run(SERVER, "--version").stdout == "compass-server 0.1.0\n"
    for command in (RUNNER, MCP):
        assert _run(command, "--version").stdout == f"{command.name} 0.1.0\n"


def _every_action(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from _every_action(sub)
        else:
            yield parser.prog, action


# Flags that pick what a command does rather than set something: --x alone.
MODES = {"--demo", "--all"}
METAVARS = {"N", "SECONDS", "RATIO", "ID", "TOKEN_ID", "WEBHOOK_ID", "DELIVERY_ID", "NAME"}
METAVARS |= {"HANDLE", "TEXT", "DURATION", "URL", "TOKEN", "FILE", "DIR", "[HOST:]PORT"}
METAVARS |= {"HOST:PORT", "KEY", "KEY=VALUE,…", "NETWORK,…", "WAIT,…", "TYPE,…"}
METAVARS |= {"JSON", "EMAIL", "ASK_ID", "ACCOUNT_ID", "SESSION_ID", "LINK_ID", "TIME"}
METAVARS |= {"HOST", "PASSWORD", "HH:MM-HH:MM", "ZONE"}
METAVARS |= {"APP_ID", "TEAM_ID", "SLACK_ID", "POLICY", "PATH"}


def test_every_flag_has_help_a_metavar_for_its_value_and_switches_take_no() -> None:
    from compass_agentkit.hook import _parser as hook_parser
    from compass_agentkit.mcp_server.cli import _parser as mcp_parser
    from compass_agentkit.runner import _parser as runner_parser
    from compass_server.cli import parser as server_parser

    seen = 0
    for parser in (server_parser(), runner_parser(), mcp_parser(), hook_parser()):
        for prog, action in _every_action(parser):
            if isinstance(action, argparse._HelpAction | argparse._VersionAction):
                continue
            name = f"{prog} {'/'.join(action.option_strings) or action.dest}"
            seen += 1
            assert action.help and action.help != argparse.SUPPRESS, name
            if action.nargs == 0:
                # A switch: --x/--no-x, unless it picks a mode.
                flag = action.option_strings[0]
                assert isinstance(action, argparse.BooleanOptionalAction) or flag in MODES, name
                continue
            if action.choices is not None:
                continue
            metavar = action.metavar
            assert isinstance(metavar, str), name
            assert metavar in METAVARS or "|" in metavar, name
    assert seen > 100


def test_a_settings_flag_takes_what_its_kind_says() -> None:
    from compass_server import config
    from compass_server.cli import parser as server_parser

    serve = server_parser()._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    flags = {a.option_strings[0]: a for a in serve._actions if a.option_strings}
    kinds = {config.Count: "N", config.Seconds: "SECONDS", config.Address: "[HOST:]PORT"}
    for s in config.SETTINGS:
        expected = kinds.get(type(s.kind))
        if expected:
            assert flags[s.flag].metavar == expected, s.flag
    assert flags["--data-dir"].metavar == "DIR"
    assert flags["--tls-cert"].metavar == "FILE"
    assert flags["--log-format"].metavar == "text|json"


def test_the_kit_warns_about_a_variable_one_letter_from_its_own() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPASS_")}
    done = subprocess.run(
        [RUNNER, "--agent", "a"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**env, "COMPASS_RUNER_TOKEN": "t"},
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "compass-runner: warning: COMPASS_RUNER_TOKEN is not a variable Compass reads (did you "
        "mean COMPASS_RUNNER_TOKEN?)",
        "compass-runner: a runner token is required: --token or COMPASS_RUNNER_TOKEN; see "
        "compass-runner --help",
    ]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Each command by one of the two names (they share the flag).
@pytest.mark.parametrize(("command", "flag"), [(RUNNER, "--grpc"), (MCP, "--url")])
def test_a_wrong_port_gives_up_after_connect_seconds_naming_what_it_tried(
    command: pathlib.Path, flag: str
) -> None:
    port = _closed_port()
    started = time.monotonic()
    done = _run(
        command,
        flag,
        f"127.0.0.1:{port}",
        "--token",
        "t",
        "--agent",
        "a",
        "--connect-seconds",
        "1.5",
        env={"COMPASS_LOG_LEVEL": "WARNING"},
    )
    took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert 1.5 <= took < 20
    last = done.stderr.strip().splitlines()[-1]
    assert f"no connection to the Compass server at 127.0.0.1:{port} within 1.5s (" in last
    assert "attempts; the last: unavailable" in last


def test_the_kit_imports_nothing_of_the_server() -> None:
    """The kit is installed alone on runners' machines: no module of it names the
    server's package, so it can't come to depend on it."""
    kit = ROOT / "agentkit" / "compass_agentkit"
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted(kit.rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "compass_server" in line
    ]
    assert found == [], found


def test_beside_the_server_its_variables_draw_no_warning_from_the_kit() -> None:
    """The kit warns about a near-miss of its own names (one typo away); no
    variable the server reads is one, so a machine running both is quiet."""
    from compass_agentkit.command import ENVIRONMENT, unknown_environment
    from compass_server.environment import KNOWN

    theirs = {name: "x" for name in KNOWN if name not in ENVIRONMENT}
    assert unknown_environment(theirs, ENVIRONMENT, near_only=True) == []
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPASS_")}
    done = subprocess.run(
        [RUNNER, "--agent", "a"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**env, **theirs},
    )
    assert "warning" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("argv", "meant"),
    [
        (["serve", "--port", "9999"], "--http-listen [HOST:]PORT or --grpc-listen [HOST:]PORT"),
        (["serve", "--host=0.0.0.0"], "--http-listen [HOST:]PORT or --grpc-listen [HOST:]PORT"),
        (["serve", "--db", "postgresql://x"], "--database-url URL"),
        (["admin", "create-workspace", "acme", "--dsn", "x"], "--database-url URL"),
        (["serve", "--grpc-listn", "1"], "--grpc-listen"),
    ],
)
def test_a_flag_that_isnt_one_names_the_flag_a_person_meant(argv: list[str], meant: str) -> None:
    done = _run(SERVER, *argv)
    assert done.returncode == 2
    flag = argv[-2] if "=" not in argv[-1] else argv[-1].split("=")[0]
    command = " ".join(argv[:2]) if argv[0] == "admin" else argv[0]
    assert done.stderr == (
        f"compass-server {command}: {flag}: unknown option (did you mean {meant}?); "
        f"see compass-server {command} --help\n"
    )


def test_a_database_url_that_is_none_is_refused_in_one_line() -> None:
    served = _run(SERVER, "serve", "--database-url", "x")
    assert served.returncode == 2 and "Traceback" not in served.stderr
    assert served.stderr.startswith("compass-server: ") and "PostgreSQL URL" in served.stderr
    administered = _run(SERVER, "admin", "create-workspace", "acme", "--database-url", "x")
    assert administered.returncode == 1 and "Traceback" not in administered.stderr
    assert "PostgreSQL URL" in json.loads(administered.stderr)["error"]
