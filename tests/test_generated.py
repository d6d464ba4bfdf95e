"""The generated contract imports cleanly and carries the wire numbers."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

GEN = pathlib.Path(__file__).resolve().parents[1] / "gen"
MODULES = sorted(
    ".".join(p.relative_to(GEN).with_suffix("").parts)
    for p in GEN.rglob("*.py")
    if p.name != "__init__.py"
)


def test_every_generated_module_is_listed() -> None:
    assert {
        "compass.v1.comms_pb2",
        "compass.v1.comms_pb2_grpc",
        "compass.v1.comms_connect",
        "compass.v1.agent_gateway_pb2",
        "compass.v1.agent_gateway_pb2_grpc",
        "compass.v1.agent_gateway_connect",
    } <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_generated_module_imports_without_warnings(module: str) -> None:
    # A fresh interpreter with warnings as errors: a protobuf version mismatch
    # shows up here as a warning or a VersionError.
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_the_top_level_is_the_layout_the_design_names() -> None:
    root = GEN.parent
    for name in ("pyproject.toml", "proto", "gen", "compass_server", "tests"):
        assert (root / name).exists(), name
    for name in ("buf.yaml", "buf.gen.yaml", "tox.ini"):
        assert (root / name).is_file(), name
    # Only what git holds: an old checkout may keep agentkit/gen/ as stale bytecode.
    old = subprocess.run(
        ["git", "ls-files", "agentkit/gen"], cwd=root, capture_output=True, text=True
    )
    assert old.returncode != 0 or not old.stdout.strip()
    outs = [
        line.split(":", 1)[1].strip()
        for line in (root / "buf.gen.yaml").read_text().splitlines()
        if line.strip().startswith("out:")
    ]
    assert outs and set(outs) == {"gen"}
