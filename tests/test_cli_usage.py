"""What each command line says to a person who typed it wrong: one line
naming what is wrong and the command's --help, an unknown option with the
nearest known one, and help that exits 0. Each runs the real command."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

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
