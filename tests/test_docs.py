"""The docs' walkthroughs, run as a reader pastes them.

Sybil reads each page's fenced blocks in order. Every `sh` block runs in one
bash per page, so a step sees the variables of the steps before it; a `text`
block right after it must match what it printed on stdout (`…` is anything);
`<!-- skip: next -->` shows a block without running it, and
`<!-- page: NAME -->` is a step a person takes on the page, taken here in
Chromium. The shell works in an empty folder that holds only a `.venv` link,
so a step that writes where it runs fails, and it reaches a fresh server on
loopback: the docs' default addresses are pointed at its ports. docs/slack.md
talks to a stand-in of Slack's Web API started here (`SLACK_API_URL` in its
shell).

To debug a page: DOCS_TRACE=1 traces each step (`set -x`) into the stderr a
failure shows; DOCS_STEP_SECONDS changes how long one step may take.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any

import pytest
from sybil import Document, Example
from sybil.parsers.markdown import CodeBlockParser, SkipParser
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer

from tests.oidc import free_port
from tests.procs import ServerProcess
from tests.slack_standin import SlackStandIn

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
# The longest one step may take: the runner and MCP steps wait for a person.
STEP_SECONDS = float(os.environ.get("DOCS_STEP_SECONDS", "120"))
DONE = "__compass_docs_step_done__"


class Shell:
    """One bash for a page's steps, run with `set -euo pipefail` like a careful reader's."""

    def __init__(self, cwd: pathlib.Path, scratch: pathlib.Path, env: dict[str, str]) -> None:
        self.cwd, self.scratch = cwd, scratch
        self.steps = 0
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        self._send("set -euo pipefail\n")
        if os.environ.get("DOCS_TRACE"):
            self._send("set -x\n")

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode())
        self.proc.stdin.flush()

    def run(self, source: str) -> tuple[str, str]:
        """Runs one step; returns its stdout and stderr, or raises naming why it failed."""
        self.steps += 1
        step = self.scratch / f"step-{self.steps}.sh"
        out, err = step.with_suffix(".out"), step.with_suffix(".err")
        step.write_text(source)
        self._send(f"source {step} > {out} 2> {err}; echo {DONE}\n")
        finished = self._wait_done()
        stdout = out.read_text() if out.exists() else ""
        stderr = err.read_text() if err.exists() else ""
        if not finished:
            raise AssertionError(
                f"the step failed (bash stopped; see its stderr):\n{source}\n"
                f"--- stdout\n{stdout}--- stderr\n{stderr}"
            )
        return stdout, stderr

    def _wait_done(self) -> bool:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + STEP_SECONDS
        seen = b""
        while DONE.encode() not in seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"a step took more than {STEP_SECONDS:.0f} s")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    return False
                seen += chunk
        return True

    def value(self, name: str) -> str:
        """A shell variable a page step needs (an ask id, a token)."""
        stdout, _ = self.run(f'printf %s "${name}"\n')
        return stdout

    def close(self) -> None:
        # Ends bash and what its steps left in the background (a runner still waiting).
        with_pgid = self.proc.pid
        try:
            os.killpg(with_pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


def matches(expected: str, actual: str) -> bool:
    """The printed lines, line by line: `…` stands for anything within a line,
    and a line that is only `…` for any number of lines."""
    pattern = ""
    for line in expected.strip("\n").splitlines():
        line = line.rstrip()
        if line == "…":
            pattern += "(?:[^\n]*\n)*?"
        else:
            pattern += "[^\n]*".join(re.escape(part) for part in line.split("…")) + "\n"
    got = "".join(line.rstrip() + "\n" for line in actual.strip("\n").splitlines())
    return re.fullmatch(pattern, got) is not None


PageStep = Callable[[Shell, Any, int], Coroutine[Any, Any, None]]


async def answer_the_tour_ask(shell: Shell, browser: Any, http_port: int) -> None:
    """README's tour: ada opens the sign-in address printed for her, which
    lands on the ask, and answers it. No token is pasted."""
    from playwright.async_api import expect

    from tests.browser import ask_block, new_tab, question

    ask, address = shell.value("ASK"), shell.value("ADDRESS")

    class Server:
        pass

    server = Server()
    server.http_port = http_port  # type: ignore[attr-defined]
    async with new_tab(browser, server) as tab:
        await tab.goto(address)
        await tab.get_by_role("button", name="Sign in as ada").click()
        form = ask_block(tab, ask)
        await question(form, "database").get_by_label("PostgreSQL").check()
        clients = question(form, "clients")
        await clients.get_by_label("Python").check()
        await clients.get_by_label("Go").check()
        await clients.get_by_label("Other").fill("and a CLI")
        await form.get_by_role("button", name="Submit answers").click()
        await expect(form.get_by_text("Answered by ada.")).to_be_visible()


async def sign_in_through_the_provider(shell: Shell, browser: Any, http_port: int) -> None:
    """docs/signin.md: lin signs in through the provider's own login page."""
    from playwright.async_api import expect

    from tests.browser import new_tab

    class Server:
        pass

    server = Server()
    server.http_port = http_port  # type: ignore[attr-defined]
    async with new_tab(browser, server) as tab:
        await tab.goto("/")
        await tab.get_by_role("link", name="Sign in with Mock ID").click()
        await tab.locator('input[name="sub"]').fill("lin")
        await tab.get_by_role("button", name="Authorize").click()
        await tab.wait_for_url(f"http://127.0.0.1:{http_port}/*")
        await expect(tab.locator("#signed-in")).to_contain_text("lin")


PAGE_STEPS: dict[str, PageStep] = {
    "tour": answer_the_tour_ask,
    "signin": sign_in_through_the_provider,
}


class Walkthrough:
    """Sybil's evaluators for one page, against one server."""

    def __init__(
        self,
        shell: Shell,
        ports: dict[str, int],
        loop: asyncio.AbstractEventLoop,
        browser: Any,
    ) -> None:
        self.shell, self.ports, self.loop, self.browser = shell, ports, loop, browser
        self.printed: tuple[int, str] | None = None
        # The page's own server, when it restarts it (else the shared one).
        self.server: ServerProcess | None = None

    def here(self, text: str) -> str:
        http, grpc = f"127.0.0.1:{self.ports['http']}", f"127.0.0.1:{self.ports['grpc']}"
        provider = f"localhost:{self.ports['provider']}"
        text = text.replace("--port 9400", f"--port {self.ports['provider']}")
        for name, address in (("8080", http), ("50051", grpc), ("9400", provider)):
            text = text.replace(f"localhost:{name}", address)
            text = text.replace(f"127.0.0.1:{name}", address)
        return text

    def sh(self, example: Example) -> None:
        stdout, _ = self.shell.run(self.here(example.parsed))
        self.printed = (example.end, stdout)

    def text(self, example: Example) -> str | None:
        printed, self.printed = self.printed, None
        if printed is None:
            return None
        end, stdout = printed
        if example.document.text[end : example.start].strip():
            return None  # words between: an illustration, not this step's output
        expected = self.here(example.parsed)
        if matches(expected, stdout):
            return None
        return f"the step printed:\n{stdout}\nthe page says it prints:\n{expected}"

    def page(self, example: Example) -> None:
        name = example.parsed
        step = PAGE_STEPS.get(name)
        assert step is not None, f"no page step {name!r} in tests/test_docs.py"
        assert self.browser is not None, "a page step needs the browser"
        coro = step(self.shell, self.browser, self.ports["http"])
        asyncio.run_coroutine_threadsafe(coro, self.loop).result(STEP_SECONDS)

    def restart(self, example: Example) -> None:
        """`<!-- restart: SETTING=VAR … -->`: the reader restarts their server
        with these settings, valued as the page's shell variables say."""
        assert self.server is not None, "a restart needs the page's own server"
        # Where the provider sends the browser back: this server, as 8080 is the reader's.
        env = {"COMPASS_PUBLIC_URL": f"http://127.0.0.1:{self.ports['http']}"}
        for pair in example.parsed.split():
            setting, _, variable = pair.partition("=")
            env[setting] = self.here(self.shell.value(variable))
        assert self.server.stop() == 0, "".join(self.server.log)
        self.server = ServerProcess(
            self.server.database_url,
            grpc_port=self.ports["grpc"],
            http_port=self.ports["http"],
            env={**self.server.extra_env, **env},
        ).start()

    def parsers(self) -> list[Any]:
        return [
            SkipParser(),
            CodeBlockParser("sh", self.sh),
            CodeBlockParser("text", self.text),
            PageParser(self.page),
            PageParser(self.restart, "restart", r"[\w=\s]+?"),
        ]


class PageParser:
    """`<!-- page: NAME -->`: a step a person takes on the page."""

    def __init__(
        self,
        evaluator: Callable[[Example], None],
        directive: str = "page",
        arguments: str = r"[\w-]+",
    ) -> None:
        self.lexer = DirectiveInHTMLCommentLexer(directive=directive, arguments=arguments)
        self.evaluator = evaluator

    def __call__(self, document: Document) -> Iterator[Any]:
        for region in self.lexer(document):
            region.parsed = region.lexemes["arguments"]
            region.evaluator = self.evaluator
            yield region


@pytest.fixture(scope="module")
def docs_server(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A fresh `compass-server serve` on loopback, signing receipts like the embedded setup."""
    from compass_server.receipts.keys import new_key_file

    keys = tmp_path_factory.mktemp("docs-receipt-keys")
    new_key_file(keys)
    proc = ServerProcess(database_url, env={"COMPASS_RECEIPT_KEYS_DIR": str(keys)}).start()
    yield proc
    assert proc.stop() == 0, "".join(proc.log)


def runs_a_step(path: pathlib.Path) -> bool:
    return bool(re.search(r"(?m)^```sh$", path.read_text()))


def has_page_steps(path: pathlib.Path) -> bool:
    return bool(re.search(r"(?m)^<!-- page: ", path.read_text()))


def restarts(path: pathlib.Path) -> bool:
    return "<!-- restart: " in path.read_text()


async def run_page(
    page: pathlib.Path, server: Any, database_url: str, tmp_path: pathlib.Path, browser: Any
) -> None:
    """The page's steps against `server`; a page that restarts the reader's
    server gets one of its own (on the same database), so no other page is
    cut off meanwhile."""
    for tool in ("curl", "jq"):
        assert shutil.which(tool), f"the walkthroughs need {tool}"
    own = None
    # docs/slack.md talks to a stand-in of Slack's Web API; its steps find it here.
    standin = await SlackStandIn().start() if page.name == "slack.md" else None
    if restarts(page):
        own = server = ServerProcess(database_url, env=dict(server.extra_env)).start()
    folder, scratch = tmp_path / "reader", tmp_path / "steps"
    folder.mkdir()
    scratch.mkdir()
    (folder / ".venv").symlink_to(pathlib.Path(sys.prefix))
    env = {
        **os.environ,
        # The admin commands' database, and the runners' default hub, are the test server's.
        "COMPASS_DATABASE_URL": database_url,
        "COMPASS_URL": f"127.0.0.1:{server.grpc_port}",
        # The addresses admin commands print (sign-in, one-ask links) are its too.
        "COMPASS_PUBLIC_URL": f"http://127.0.0.1:{server.http_port}",
        "COMPASS_LOG_LEVEL": "WARNING",
        **({"SLACK_API_URL": standin.api_url} if standin is not None else {}),
    }
    shell = Shell(folder, scratch, env)
    walk = Walkthrough(
        shell,
        {"http": server.http_port, "grpc": server.grpc_port, "provider": free_port()},
        asyncio.get_running_loop(),
        browser,
    )
    walk.server = own
    document = Document.parse(str(page), *walk.parsers())

    def run_all() -> None:
        for example in document:
            example.evaluate()

    try:
        await asyncio.to_thread(run_all)
    finally:
        shell.close()
        if standin is not None:
            await standin.close()
        if walk.server is not None:
            assert walk.server.stop() == 0, "".join(walk.server.log)
    left = sorted(p.name for p in folder.iterdir() if p.name != ".venv")
    assert not left, f"the walkthrough wrote into the folder it runs in: {left}"


WITHOUT_A_PERSON = [p for p in PAGES if runs_a_step(p) and not has_page_steps(p)]
WITH_A_PERSON = [p for p in PAGES if has_page_steps(p)]


def page_id(page: pathlib.Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.fixture(scope="module")
async def walkthroughs(
    request: pytest.FixtureRequest,
    docs_server: Any,
    database_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[dict[pathlib.Path, asyncio.Task[None]]]:
    """The pages no person takes part in, started at once side by side: each
    spends most of its time waiting on a process it started, so together they
    take about as long as the longest."""
    wanted = {
        item.callspec.params["page"]
        for item in request.session.items
        if getattr(item, "originalname", "") == "test_the_walkthrough_runs_as_written"
    }
    tasks = {
        page: asyncio.create_task(
            run_page(page, docs_server, database_url, tmp_path_factory.mktemp("walkthrough"), None)
        )
        for page in WITHOUT_A_PERSON
        if page in wanted
    }
    yield tasks
    await asyncio.gather(*tasks.values(), return_exceptions=True)


# First, so the pages without a person run meanwhile.
@pytest.mark.browser
@pytest.mark.timeout(180)
@pytest.mark.parametrize("page", WITH_A_PERSON, ids=page_id)
async def test_the_walkthrough_with_a_person_on_the_page_runs_as_written(
    page: pathlib.Path,
    docs_server: Any,
    database_url: str,
    tmp_path: pathlib.Path,
    browser: Any,
    walkthroughs: dict[pathlib.Path, asyncio.Task[None]],
) -> None:
    await run_page(page, docs_server, database_url, tmp_path, browser)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("page", WITHOUT_A_PERSON, ids=page_id)
async def test_the_walkthrough_runs_as_written(
    page: pathlib.Path, walkthroughs: dict[pathlib.Path, asyncio.Task[None]]
) -> None:
    await walkthroughs[page]


class NoServer:
    http_port = grpc_port = 9


@pytest.mark.parametrize(
    ("markdown", "why"),
    [
        ("```sh\necho 41\n```\n\n```text\n42\n```\n", "the page says it prints"),
        ("```sh\nfalse\necho never\n```\n", "the step failed"),
        ("```sh\necho $NOT_SET_BY_ANY_STEP\n```\n", "the step failed"),
        ("```sh\ntouch notes.txt\n```\n", "wrote into the folder it runs in"),
        ("<!-- page: nope -->\n", "no page step 'nope'"),
    ],
    ids=["output", "status", "unset", "writes", "page"],
)
async def test_a_walkthrough_that_drifts_fails(
    markdown: str, why: str, tmp_path: pathlib.Path
) -> None:
    page = tmp_path / "page.md"
    page.write_text(markdown)
    with pytest.raises(AssertionError, match=why):
        await run_page(page, NoServer(), "postgresql://nowhere/none", tmp_path, None)


def test_the_matcher_takes_ellipses_for_anything() -> None:
    assert matches("ask_… HTTP 409", "ask_1f2e HTTP 409\n")
    assert matches("first\n…\nlast", "first\na\nb\nlast\n")
    assert matches("first\n…\nlast", "first\nlast\n")
    assert not matches("ask_… HTTP 409", "ask_1f2e HTTP 200")
    assert not matches("one", "one\ntwo")


def anchors(page: pathlib.Path) -> set[str]:
    """GitHub's anchors for a page's headings."""
    found = set()
    text = re.sub(r"(?ms)^```.*?^```", "", page.read_text())
    for heading in re.findall(r"(?m)^#+ (.+)$", text):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def test_every_link_between_the_docs_resolves() -> None:
    broken = []
    for page in [*PAGES, ROOT / "agentkit" / "README.md"]:
        text = re.sub(r"(?ms)^```.*?^```", "", page.read_text())
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
