#!/usr/bin/env python3
"""The developer's entry point: needs nothing but Python 3.11.

usage: python3 dev.py COMMAND [ARGS]

commands:
  test [PYTEST_ARGS]   set up .venv, run every gate, then pytest with PYTEST_ARGS
  test --repeat N [--load K] [PYTEST_ARGS]
                       only pytest: each chosen test N times, the copies spread over
                       the parallel processes so they run side by side, with K
                       processes keeping the cores busy meanwhile (default: none):
                       `python3 dev.py test --repeat 20 --load 2 -k shutdown`
  serve [ARGS]         set up .venv and run `compass-server serve ARGS`
  gen                  regenerate gen/ from proto/ with buf
  check-contract       buf lint, the gen/ drift check and buf breaking
  gates [PYTEST_ARGS]  what `test` runs, with the tools of $COMPASS_VENV as they are
                       (tox installs them itself, then runs this)

It creates its own virtualenv in .venv (or $COMPASS_VENV) and installs both
distributions into it (editable) when either pyproject.toml changes, so a
fresh clone needs no other step: the agent kit (agentkit/, whose wheel
carries the generated contract from gen/) and the server.

buf breaking compares the contract with the merge base with main (or, on
main itself, the commit before HEAD), with the newest release tag (v*)
before HEAD, and uncommitted edits with HEAD; $COMPASS_BREAKING_AGAINST names
one buf input to compare with instead.
"""

from __future__ import annotations

import difflib
import hashlib
import io
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import venv
from collections.abc import Callable
from typing import NoReturn

ROOT = pathlib.Path(__file__).resolve().parent
VENV = pathlib.Path(os.environ.get("COMPASS_VENV", ROOT / ".venv"))
BIN = VENV / "bin"
STAMP = VENV / ".compass-installed"
DEV_STAMP = VENV / ".compass-dev-installed"
# The light distribution: the agent kit and its console scripts; its wheel
# carries gen/ as the `compass` package.
AGENTKIT = ROOT / "agentkit"
# Where buf.gen.yaml writes the generated `compass` package, from ROOT.
GEN = pathlib.PurePosixPath("gen")
# The branch a change is compared with, and the tags that mark releases.
MAIN_REFS = ("main", "origin/main", "refs/remotes/origin/HEAD")
RELEASE_TAGS = "v[0-9]*"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # buf finds the local plugins and grpc_tools' protoc on PATH.
    env["PATH"] = os.pathsep.join([str(ROOT / "tools"), str(BIN), env.get("PATH", "")])
    env["VIRTUAL_ENV"] = str(VENV)
    return env


def run(*args: str | os.PathLike[str], check: bool = True, cwd: pathlib.Path = ROOT) -> int:
    print("+", " ".join(str(a) for a in args), flush=True)
    code = subprocess.call([str(a) for a in args], cwd=cwd, env=_env())
    if check and code != 0:
        sys.exit(code)
    return code


def _installing(*args: str | os.PathLike[str]) -> None:
    # pip shows the build backend's warnings even with --quiet: setuptools'
    # notice about editable installs, three times, says nothing to act on.
    print("+", " ".join(str(a) for a in args), flush=True)
    env = {**_env(), "PYTHONWARNINGS": "ignore"}
    code = subprocess.call([str(a) for a in args], cwd=ROOT, env=env)
    if code != 0:
        sys.exit(code)


def _dev_requirements() -> list[str]:
    """What the tests and tools need beside the server: its `dev` extra."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        return list(tomllib.load(f)["project"]["optional-dependencies"]["dev"])


def ensure_venv(*, dev: bool = True) -> None:
    """The server's runtime in .venv; with `dev`, the tests' and tools' too
    (serving needs none of them)."""
    if not (BIN / "python").exists():
        print(f"creating virtualenv in {VENV}", flush=True)
        venv.create(VENV, with_pip=True)
    digest = hashlib.sha256()
    for project in (AGENTKIT, ROOT):
        digest.update((project / "pyproject.toml").read_bytes())
    wanted = digest.hexdigest()
    if not (STAMP.exists() and STAMP.read_text() == wanted):
        pip = (BIN / "python", "-m", "pip", "install", "--quiet")
        _installing(*pip, "--upgrade", "pip")
        # One resolve: the server's dependency on the kit is met by the local tree.
        _installing(*pip, "-e", AGENTKIT, "-e", ROOT)
        # Again on its own: replacing an older server install (which once shipped
        # compass-runner itself) removes the kit's scripts of the same name.
        _installing(*pip, "--no-deps", "--force-reinstall", "-e", AGENTKIT)
        STAMP.write_text(wanted)
        DEV_STAMP.unlink(missing_ok=True)
    if dev and not (DEV_STAMP.exists() and DEV_STAMP.read_text() == wanted):
        _installing(BIN / "python", "-m", "pip", "install", "--quiet", *_dev_requirements())
        DEV_STAMP.write_text(wanted)


def _write_package_markers(out: pathlib.Path) -> None:
    # protoc writes no __init__.py; the generated tree imports as package `compass`.
    for folder in [out / "compass", *sorted((out / "compass").rglob("*"))]:
        if folder.is_dir() and folder.name != "__pycache__":
            (folder / "__init__.py").touch()


def generate(out: pathlib.Path) -> None:
    if out.exists():
        shutil.rmtree(out)
    run(
        BIN / "buf",
        "generate",
        "--output",
        out.relative_to(ROOT) if out.is_relative_to(ROOT) else out,
    )
    # buf.gen.yaml writes under GEN; --output prefixes it.
    produced = out.joinpath(*GEN.parts)
    if produced.exists():
        for child in produced.iterdir():
            child.rename(out / child.name)
        while produced != out:
            produced.rmdir()
            produced = produced.parent
    _write_package_markers(out)


def gen() -> None:
    ensure_venv()
    with tempfile.TemporaryDirectory(dir=ROOT) as tmp:
        fresh = pathlib.Path(tmp, "out")
        generate(fresh)
        target = ROOT.joinpath(*GEN.parts)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(fresh, target)


def _tree(root: pathlib.Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def check_drift() -> None:
    with tempfile.TemporaryDirectory(dir=ROOT) as tmp:
        fresh = pathlib.Path(tmp, "out")
        generate(fresh)
        want, have = _tree(fresh), _tree(ROOT.joinpath(*GEN.parts))
        differ = sorted(k for k in want.keys() | have.keys() if want.get(k) != have.get(k))
        if differ:
            print(f"{GEN}/ does not match proto/ (run `python3 dev.py gen`):", *differ, sep="\n  ")
            sys.exit(1)
    print(f"{GEN}/ matches proto/")


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()


def _commit(ref: str) -> str:
    return _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")


def _bases(head: str) -> list[tuple[str, str]]:
    """(what it is, commit) for each earlier contract the tree is checked
    against: a few commits, however long the history."""
    bases: list[tuple[str, str]] = []
    main = next((ref for ref in MAIN_REFS if _commit(ref)), "")
    # Empty in a shallow clone whose history stops before the fork.
    fork = _git("merge-base", head, main) if main else ""
    if fork and fork != head:
        bases.append((f"the merge base with {main}", fork))
    else:
        # On main itself, or no main to fork from: what the last commit changed.
        parent = _commit(f"{head}^")
        if parent:
            bases.append(("the commit before HEAD", parent))
        else:
            why = (
                "a shallow clone" if _git("rev-parse", "--is-shallow-repository") == "true" else ""
            )
            print(
                "buf breaking: no earlier commit to compare with"
                + (f" ({why})" if why else "")
                + "; only uncommitted edits are checked"
            )
    tag = _git("describe", "--tags", "--abbrev=0", "--match", RELEASE_TAGS, head)
    if tag and _commit(tag) not in {commit for _, commit in bases} | {head}:
        bases.append((f"the release {tag}", _commit(tag)))
    return bases


def _breaking_against(what: str, commit: str, tmp: pathlib.Path) -> None:
    """buf breaking of the work tree against the contract at `commit`, read
    with `git archive` (works in shallow clones and worktrees alike)."""
    if not _git("ls-tree", "--name-only", commit, "--", "proto", "buf.yaml"):
        print(f"buf breaking: no contract at {what}; nothing to compare")
        return
    old = tmp / commit
    old.mkdir()
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, "--", "proto", "buf.yaml"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        # The "data" filter where this Python has it (3.11.4 on); the archive is our own.
        tar.extractall(old, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    print(f"buf breaking: against {what} ({commit[:12]})", flush=True)
    run(BIN / "buf", "breaking", "--against", old)


def check_breaking() -> None:
    """The contract in the work tree against the few that came before it."""
    against = os.environ.get("COMPASS_BREAKING_AGAINST")
    if against:
        run(BIN / "buf", "breaking", "--against", against)
        return
    head = _commit("HEAD")
    with tempfile.TemporaryDirectory() as tmp:
        if head:
            if _git("status", "--porcelain", "--", "proto", "buf.yaml"):
                _breaking_against("HEAD, for uncommitted edits", head, pathlib.Path(tmp))
            for what, commit in _bases(head):
                _breaking_against(what, commit, pathlib.Path(tmp))
    print("buf breaking: no breaking change")


def check_contract() -> None:
    run(BIN / "buf", "lint")
    check_drift()
    check_breaking()


def _repeat(extra: list[str]) -> tuple[int, int, list[str]]:
    """(--repeat N, --load K, the rest) of the test command's arguments."""
    counts = {"--repeat": 0, "--load": 0}
    rest: list[str] = []
    args = iter(extra)
    for arg in args:
        name, eq, value = arg.partition("=")
        if name in counts:
            value = value if eq else next(args, "")
            if not value.isdigit() or (name == "--repeat" and int(value) < 1):
                _usage(f"{name} takes a whole number, not {value!r}")
            counts[name] = int(value)
        else:
            rest.append(arg)
    if counts["--load"] and not counts["--repeat"]:
        _usage("--load goes with --repeat N")
    return counts["--repeat"], counts["--load"], rest


_BURN = "import time\nwhile True:\n    time.perf_counter()\n"


def repeat(times: int, load: int, extra: list[str]) -> None:
    """The chosen tests, each `times` times side by side, while `load`
    processes keep the cores busy: a test that waits on a wall clock or a
    fixed sleep fails here first."""
    workers = _workers(extra)
    if workers:
        workers[workers.index("loadfile")] = "load"
    burners = [subprocess.Popen([sys.executable, "-c", _BURN]) for _ in range(load)]
    try:
        code = run(
            BIN / "python",
            "-m",
            "pytest",
            *workers,
            f"--count={times}",
            *extra,
            check=False,
        )
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    sys.exit(1 if code == 5 else code)


def _workers(extra: list[str]) -> list[str]:
    """Tests run in parallel processes, a test file per process at a time, unless
    the arguments say otherwise (`-n 0` runs them in this one). Most tests wait on
    servers and the database, so one more than the cores keeps them busy without
    crowding the tests that time what a server does."""
    if "no:xdist" in extra or any(a.startswith(("-n", "--numprocesses")) for a in extra):
        return []
    count = os.environ.get("COMPASS_TEST_WORKERS") or str((os.cpu_count() or 1) + 1)
    return ["-n", count, "--dist", "loadfile"]


def gates(extra: list[str]) -> None:
    check_contract()
    run(BIN / "ruff", "check", ".")
    run(BIN / "ruff", "format", "--check", ".")
    run(BIN / "mypy")
    code = run(BIN / "python", "-m", "pytest", *_workers(extra), *extra, check=False)
    if code == 5:
        print("pytest collected no tests: that is a failure here")
        sys.exit(1)
    sys.exit(code)


def test(extra: list[str]) -> None:
    ensure_venv()
    times, load, rest = _repeat(extra)
    if times:
        repeat(times, load, rest)
    gates(rest)


def _in_venv(step: Callable[[], None]) -> None:
    ensure_venv()
    step()


def serve(extra: list[str]) -> None:
    ensure_venv(dev=False)
    os.execve(str(BIN / "compass-server"), [str(BIN / "compass-server"), "serve", *extra], _env())


COMMANDS: dict[str, Callable[[list[str]], None]] = {
    "test": test,
    "serve": serve,
    "gen": lambda extra: gen(),
    "check-contract": lambda extra: _in_venv(check_contract),
    "gates": gates,
}
# Commands that take no arguments of their own.
BARE = ("gen", "check-contract")


def _usage(problem: str) -> NoReturn:
    print(f"dev.py: {problem}; see python3 dev.py --help", file=sys.stderr)
    sys.exit(2)


def main(argv: list[str]) -> None:
    if not argv:
        _usage("no command given")
    command, extra = argv[0], argv[1:]
    if command in ("-h", "--help", "help"):
        print(__doc__.strip())
        return
    if command not in COMMANDS:
        near = difflib.get_close_matches(command, COMMANDS, 1)
        _usage(f"unknown command {command!r}" + (f" (did you mean {near[0]}?)" if near else ""))
    if command in BARE and extra:
        _usage(f"{command} takes no arguments, not {' '.join(extra)}")
    COMMANDS[command](extra)


if __name__ == "__main__":
    main(sys.argv[1:])
