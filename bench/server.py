"""A real `compass-server` for the server rows, and what they share.

* `server_process(url)` starts `compass-server serve --database-url URL` on
  free ports (COMPASS_LOG_LEVEL=WARNING), waits for its one JSON ready line
  and stops it with SIGTERM at the end; `shared_server(url)` hands every row
  of a run the same process for the same database (started by the first row
  that asks, stopped when the last one is done).
* `Provisioner` makes workspaces and accounts through the server's own store
  (the same `Store.create_workspace` / `create_account` that `compass-server
  admin` calls, without a process start per account, so a thousand
  subscribers take seconds, not minutes).
* Request builders and `authorization: Bearer` metadata for both transports.
* CPU probes (`/proc`) for the server process and PostgreSQL's backends, so a
  row can report where the CPU of one op went.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from psycopg.conninfo import conninfo_to_dict

from bench.harness import CpuProbe
from compass.v1 import comms_pb2, comms_pb2_grpc
from compass_server.store import Database, Store
from compass_server.store.types import AccountKind

REPO_ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
CLK_TCK = os.sysconf("SC_CLK_TCK")

Metadata = tuple[tuple[str, str], ...]


# --------------------------------------------------------------------------- the process


@dataclass(frozen=True)
class Server:
    pid: int
    grpc_target: str  # "127.0.0.1:PORT" for grpc.aio
    http_url: str  # "http://127.0.0.1:PORT" for Connect
    database_url: str


def _server_argv() -> list[str]:
    script = Path(sys.executable).with_name("compass-server")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "compass_server.cli"]


@asynccontextmanager
async def server_process(
    database_url: str, settings: Mapping[str, str] | None = None
) -> AsyncIterator[Server]:
    """`compass-server serve` against database_url, on free loopback ports,
    with `settings` (COMPASS_… variables) added to its environment."""
    env = {
        **os.environ,
        "COMPASS_LOG_LEVEL": os.environ.get("COMPASS_LOG_LEVEL", "WARNING"),
        **(settings or {}),
    }
    proc = await asyncio.create_subprocess_exec(
        *_server_argv(),
        "serve",
        "--database-url",
        database_url,
        "--grpc-listen",
        "127.0.0.1:0",
        "--http-listen",
        "127.0.0.1:0",
        cwd=REPO_ROOT,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        raw = await asyncio.wait_for(proc.stdout.readline(), START_TIMEOUT_S)
        try:
            ready = json.loads(raw)
        except json.JSONDecodeError:
            ready = {}
        if not ready.get("ready"):
            raise RuntimeError(f"compass-server did not start (said {raw!r})")
        server = Server(
            pid=proc.pid,
            grpc_target=f"127.0.0.1:{ready['grpc_port']}",
            http_url=f"http://127.0.0.1:{ready['http_port']}",
            database_url=database_url,
        )
        print(
            f"  [compass-server pid={proc.pid} gRPC {server.grpc_target} HTTP {server.http_url}]",
            file=sys.stderr,
            flush=True,
        )
        yield server
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                proc.kill()
                await proc.wait()


_shared: dict[str, tuple[Server, AsyncExitStack, list[int]]] = {}
_shared_lock = asyncio.Lock()


@asynccontextmanager
async def shared_server(database_url: str) -> AsyncIterator[Server]:
    """One server process per database for every row that asks; it stops when
    the last of them is done."""
    async with _shared_lock:
        entry = _shared.get(database_url)
        if entry is None:
            stack = AsyncExitStack()
            server = await stack.enter_async_context(server_process(database_url))
            entry = _shared[database_url] = (server, stack, [0])
        entry[2][0] += 1
    try:
        yield entry[0]
    finally:
        async with _shared_lock:
            entry[2][0] -= 1
            if entry[2][0] == 0:
                del _shared[database_url]
                await entry[1].aclose()


# --------------------------------------------------------------------------- CPU probes


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds so far of a process and its children, live
    and ended (`serve --workers` runs the server in children); nan if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return float("nan")
    # utime, stime, and cutime, cstime of the children it reaped.
    ticks = sum(int(x) for x in fields[11:15])
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                child = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        if int(child[1]) == pid:
            ticks += sum(int(x) for x in child[11:15])
    return ticks / CLK_TCK


def _backend_database(pid: str) -> str | None:
    """The database a client backend serves ("postgres: 15/main: USER DB HOST(PORT) …"),
    or None for the postmaster and auxiliary processes (WAL writer, checkpointer, …)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            title = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    _, sep, rest = title.partition(": ")
    if not sep:
        return None  # the postmaster's own command line
    words = rest.partition(": ")[2].split()
    if len(words) >= 3 and (words[2].endswith(")") or words[2] == "[local]"):
        return words[1]
    return None


def postgres_cpu_s(databases: Collection[str] | None = None) -> float:
    """CPU seconds so far of the processes named `postgres`: the postmaster, its
    auxiliary processes (WAL writer, checkpointer, …) and the client backends
    of `databases` (all of them if None), so another database's test suite is
    left out. A backend that exits takes its share with it: compare only
    across a window in which the row's connections stay open."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                head, _, rest = f.read().rpartition(")")
        except OSError:
            continue
        if not head.endswith("(postgres"):
            continue
        if databases is not None:
            db = _backend_database(entry.name)
            if db is not None and db not in databases:
                continue
        fields = rest.split()
        total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def database_name(url: str) -> str:
    return str(conninfo_to_dict(url).get("dbname") or "postgres")


def cpu_probe(database_url: str, *pids: int, **named: Sequence[int]) -> CpuProbe:
    """Cumulative CPU of PostgreSQL for database_url ("pg"), of `pids` ("server")
    and of each named group of processes."""
    databases = {database_name(database_url)}
    groups = {**({"server": pids} if pids else {}), **named}

    def probe() -> Mapping[str, float]:
        out = {name: sum(process_cpu_s(p) for p in group) for name, group in groups.items()}
        out["pg"] = postgres_cpu_s(databases)
        return out

    return probe


# --------------------------------------------------------------------------- accounts


@dataclass(frozen=True)
class Account:
    account_id: str
    token: str

    @property
    def metadata(self) -> Metadata:
        return bearer(self.token)

    @property
    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}"}


def bearer(token: str) -> Metadata:
    return (("authorization", f"Bearer {token}"),)


class Provisioner:
    """Workspaces and accounts through the server's store, as `compass-server
    admin` makes them (superuser connection; the store scopes each write)."""

    def __init__(self, database_url: str) -> None:
        self.db = Database(database_url, min_size=1, max_size=2)
        self.store = Store(self.db)

    async def __aenter__(self) -> Provisioner:
        await self.db.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.db.close()

    async def workspace(self, name: str) -> uuid.UUID:
        return (await self.store.create_workspace(name)).workspace_id

    async def human(self, workspace_id: uuid.UUID, handle: str) -> Account:
        account, token = await self.store.create_account(workspace_id, handle, AccountKind.HUMAN)
        return Account(str(account.account_id), token)

    async def agent(self, workspace_id: uuid.UUID, handle: str, owner: Account) -> Account:
        account, token = await self.store.create_account(
            workspace_id, handle, AccountKind.AGENT, uuid.UUID(owner.account_id)
        )
        return Account(str(account.account_id), token)


MAX_CREATE_MEMBERS = 150  # CreateChannel takes at most 200; the rest join one by one


async def create_channel(
    stub: comms_pb2_grpc.CommsServiceStub, creator: Account, name: str, members: Sequence[Account]
) -> str:
    """A channel made by `creator` over gRPC, with every member in it."""
    ids = [m.account_id for m in members if m.account_id != creator.account_id]
    created = await stub.CreateChannel(
        comms_pb2.CreateChannelRequest(name=name, member_account_ids=ids[:MAX_CREATE_MEMBERS]),
        metadata=creator.metadata,
    )
    channel_id: str = created.channel.channel_id
    for account_id in ids[MAX_CREATE_MEMBERS:]:
        await stub.AddChannelMember(
            comms_pb2.AddChannelMemberRequest(channel_id=channel_id, account_id=account_id),
            metadata=creator.metadata,
        )
    return channel_id


@dataclass(frozen=True)
class Pair:
    """An agent that asks, the person who answers, and their channel."""

    agent: Account
    human: Account
    channel_id: str


class Team:
    """One workspace per row; every measurement gets K new pairs in it.

    New pairs each time keep a row's rounds alike: every round starts from
    agents with no history and no open ask, as the first did. With
    `per_pair_workspaces`, each pair gets a workspace of its own instead, so
    the K workers share no workspace's event log (a contention experiment)."""

    def __init__(self, server: Server, name: str, *, per_pair_workspaces: bool = False) -> None:
        self.server = server
        self.name = name
        self.per_pair = per_pair_workspaces
        self.workspace_id: uuid.UUID | None = None
        self.made = 0

    async def fresh(self, k: int) -> list[Pair]:
        made: list[tuple[Account, Account]] = []
        async with Provisioner(self.server.database_url) as prov:
            for i in range(self.made, self.made + k):
                if self.workspace_id is None or self.per_pair:
                    self.workspace_id = await prov.workspace(f"{self.name} {i}")
                human = await prov.human(self.workspace_id, f"person-{i}")
                made.append((await prov.agent(self.workspace_id, f"agent-{i}", human), human))
        pairs = []
        async with grpc.aio.insecure_channel(self.server.grpc_target) as channel:
            stub = comms_pb2_grpc.CommsServiceStub(channel)
            for agent, human in made:
                channel_id = await create_channel(stub, agent, f"desk-{self.made}", [human])
                pairs.append(Pair(agent, human, channel_id))
                self.made += 1
        return pairs


# --------------------------------------------------------------------------- requests

QUESTION_ID = "deploy"


def ask_request(channel_id: str) -> comms_pb2.PostMessageRequest:
    """A post holding one ask: one question, two options (the empty rows' shape)."""
    return comms_pb2.PostMessageRequest(
        channel_id=channel_id,
        blocks=[
            comms_pb2.MessageBlock(
                ask=comms_pb2.Ask(
                    questions=[
                        comms_pb2.AskQuestion(
                            question_id=QUESTION_ID,
                            header="Deploy",
                            question="Ship the release to production now?",
                            options=[
                                comms_pb2.AskOption(id="yes", label="Yes, ship it"),
                                comms_pb2.AskOption(id="no", label="No, wait"),
                            ],
                            recommended=0,
                        )
                    ]
                )
            )
        ],
    )


def text_request(channel_id: str, text: str) -> comms_pb2.PostMessageRequest:
    return comms_pb2.PostMessageRequest(
        channel_id=channel_id, blocks=[comms_pb2.MessageBlock(text=comms_pb2.TextBlock(text=text))]
    )


def answer_request(posted: comms_pb2.PostMessageResponse) -> comms_pb2.RespondToAskRequest:
    """Answer the ask a PostMessage minted: option "yes" of its one question."""
    ask_id = posted.message.blocks[0].ask.ask_id
    if not ask_id:
        raise RuntimeError("PostMessage returned no ask_id")
    return comms_pb2.RespondToAskRequest(
        ask_id=ask_id,
        answers=[comms_pb2.AskQuestionAnswer(question_id=QUESTION_ID, chosen_option_ids=["yes"])],
    )


def describe(obj: Any) -> str:
    """One line for a progress log."""
    return json.dumps(obj, default=str, separators=(",", ":"))
