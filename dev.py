#!/usr/bin/env python3
"""The developer's entry point: needs nothing but Python 3.11.

    python3 dev.py test            set up .venv, run every gate and the tests
    python3 dev.py serve [ARGS]    set up .venv and run `compass-server serve`
    python3 dev.py gen             regenerate agentkit/gen/ from proto/
    python3 dev.py check-contract  buf lint, the agentkit/gen/ drift check and buf breaking

It creates its own virtualenv in .venv and installs both distributions into it
(editable) when either pyproject.toml changes, so a fresh clone needs no other
step: the agent kit (agentkit/, with the generated contract) and the server.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import venv

ROOT = pathlib.Path(__file__).resolve().parent
VENV = pathlib.Path(os.environ.get("COMPASS_VENV", ROOT / ".venv"))
BIN = VENV / "bin"
STAMP = VENV / ".compass-installed"
# The light distribution: the agent kit, its console scripts and gen/.
AGENTKIT = ROOT / "agentkit"
# Where buf.gen.yaml writes the generated `compass` package, from ROOT.
GEN = pathlib.PurePosixPath("agentkit/gen")


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


def ensure_venv() -> None:
    if not (BIN / "python").exists():
        print(f"creating virtualenv in {VENV}", flush=True)
        venv.create(VENV, with_pip=True)
    digest = hashlib.sha256()
    for project in (AGENTKIT, ROOT):
        digest.update((project / "pyproject.toml").read_bytes())
    wanted = digest.hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted:
        return
    run(BIN / "python", "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    # One resolve: the server's dependency on the kit is met by the local tree.
    run(BIN / "python", "-m", "pip", "install", "--quiet", "-e", AGENTKIT, "-e", f"{ROOT}[dev]")
    # Again on its own: replacing an older server install (which once shipped
    # compass-runner itself) removes the kit's scripts of the same name.
    run(
        BIN / "python",
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--force-reinstall",
        "-e",
        AGENTKIT,
    )
    STAMP.write_text(wanted)


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


def check_breaking() -> None:
    """Every committed change to proto/ is checked against the contract before it."""
    against = os.environ.get("COMPASS_BREAKING_AGAINST")
    if against:
        run(BIN / "buf", "breaking", "--against", against)
        return
    commits = _git("log", "--format=%H", "-n", "30", "--", "proto").split()
    for commit in commits:
        parent = _git("rev-parse", "--verify", "--quiet", f"{commit}^")
        if not parent or not _git("ls-tree", "-r", "--name-only", parent, "--", "proto"):
            continue  # the contract's first commit has nothing before it
        run(BIN / "buf", "breaking", f".git#ref={commit}", "--against", f".git#ref={parent}")
    # Uncommitted edits are checked against the last commit.
    if _git("rev-parse", "--verify", "--quiet", "HEAD") and _git(
        "status", "--porcelain", "--", "proto"
    ):
        run(BIN / "buf", "breaking", "--against", ".git#ref=HEAD")
    print("buf breaking: no breaking change")


def check_contract() -> None:
    ensure_venv()
    run(BIN / "buf", "lint")
    check_drift()
    check_breaking()


def test(extra: list[str]) -> None:
    ensure_venv()
    check_contract()
    run(BIN / "ruff", "check", ".")
    run(BIN / "ruff", "format", "--check", ".")
    run(BIN / "mypy")
    code = run(BIN / "python", "-m", "pytest", *extra, check=False)
    if code == 5:
        print("pytest collected no tests: that is a failure here")
        sys.exit(1)
    sys.exit(code)


def serve(extra: list[str]) -> None:
    ensure_venv()
    os.execve(str(BIN / "compass-server"), [str(BIN / "compass-server"), "serve", *extra], _env())


def main() -> None:
    command, extra = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if command == "test":
        test(extra)
    elif command == "serve":
        serve(extra)
    elif command == "gen":
        gen()
    elif command == "check-contract":
        check_contract()
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
