"""`pip install compass-server` installs everything the server imports: a
module only the tests' extras bring would pass every test here and still
stop `compass-server serve` (the README's first command) on a fresh machine."""

from __future__ import annotations

import ast
import importlib.metadata
import pathlib
import sys
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Ours: the server itself, and the contract and kit that compass-agentkit ships.
OWN = {"compass_server", "compass", "compass_agentkit"}


def _installed_by(requirements: list[str]) -> set[str]:
    """The distributions these requirements install, with all they require."""
    names: set[str] = set()
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if str(req) in seen:
            continue
        seen.add(str(req))
        names.add(canonicalize_name(req.name))
        # A requirement's own extras bring the dependencies marked for them.
        extras = req.extras or {""}
        for child in importlib.metadata.requires(req.name) or ():
            dep = Requirement(child)
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in extras):
                todo.append(dep)
    return names


def _imported_modules() -> dict[str, str]:
    """Each top-level module the server's code imports, with a file that does."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "compass_server").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def test_every_module_the_server_imports_is_a_runtime_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = _installed_by(project["dependencies"])
    providers = importlib.metadata.packages_distributions()
    missing = {}
    for module, where in _imported_modules().items():
        if module in OWN or module in sys.stdlib_module_names:
            continue
        dists = {canonicalize_name(d) for d in providers.get(module, ())}
        if not dists & runtime:
            missing[module] = where
    assert missing == {}, f"imported by the server, installed only by the dev extras: {missing}"


def test_an_import_error_inside_the_server_is_reported_as_it_is() -> None:
    """The event loop's own import is what falls back to asyncio; a module
    the server can't import is told as such, not run a second time."""
    from compass_server.cli import serve

    async def missing() -> None:
        import compass_no_such_module  # type: ignore[import-not-found]  # noqa: F401

    for loop in ("uvloop", "asyncio"):
        with pytest.raises(ModuleNotFoundError, match="compass_no_such_module"):
            serve.run(missing(), loop)
