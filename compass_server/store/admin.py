"""A workspace's accounts, runners, assignments and tokens, and sign-in.

Every operation takes who asks: an account, which must be a human admin of
the workspace (checked in the operation's own transaction, so a demotion
waits for it), or the operator at the command line. Rows of other workspaces
are invisible (row-level security), so their ids are NOT_FOUND.

A token is stored as its SHA-256 digest; its secret is shown once. Revoking
or rotating one, and unassigning an agent, notify `compass_access` in the
same transaction, so every server process hears it at commit; a revocation
then waits until every live server says it applied it.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import logging
import secrets
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

from compass_server.store.db import Conn, Database, queries
from compass_server.store.errors import (
    Conflict,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
    quoted,
)
from compass_server.store.pages import decode_token, encode_token, page_size
from compass_server.store.trees import tree_refusal
from compass_server.store.types import (
    Account,
    AccountKind,
    Actor,
    Identity,
    IssuedToken,
    Operator,
    Page,
    Role,
    Runner,
    RunnerPrincipal,
    SignIn,
    Token,
    Workspace,
)

log = logging.getLogger(__name__)

ADMIN = queries("admin")

# The channel every server listens on for revocations and unassignments.
ACCESS_CHANNEL = "compass_access"
MAX_HANDLE_CHARS = 80
MAX_RUNNER_NAME_CHARS = 80
MAX_LABEL_CHARS = 80
MIN_EXPIRY = datetime.timedelta(seconds=1)
MAX_EXPIRY = datetime.timedelta(days=3650)
MAX_GRACE = datetime.timedelta(days=7)
# A revocation waits this long at most for every live server to apply it
# (then it returns anyway: a hung server still drops the token within its
# cache time). Live: a heartbeat (every 5 s) younger than LIVE.
CONFIRM_SECONDS = 2.0
LIVE = datetime.timedelta(seconds=10)

Asker = Actor | Operator
T = TypeVar("T")

_EPOCH = datetime.datetime.min.replace(tzinfo=datetime.UTC)
_END = datetime.datetime.max.replace(tzinfo=datetime.UTC)


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def new_token(prefix: str) -> str:
    return f"{prefix}_{secrets.token_urlsafe(32)}"


def _text(value: str, what: str, most: int, *, required: bool = True) -> str:
    if required and not value.strip():
        raise InvalidArgument(f"{what} needs 1 to {most} characters")
    if len(value) > most:
        raise InvalidArgument(f"{what} is at most {most} characters")
    return value


def _lifetime(value: datetime.timedelta | None, what: str) -> datetime.timedelta | None:
    if value is None:
        return None
    if value < MIN_EXPIRY or value > MAX_EXPIRY:
        raise InvalidArgument(f"{what} must be between 1 second and {MAX_EXPIRY.days} days")
    return value


def _account(row: dict[str, Any]) -> Account:
    return Account(
        row["id"],
        row["workspace_id"],
        row["handle"],
        AccountKind(row["kind"]),
        row["owner_id"],
        Role(row["role"]),
        row["created_at"],
        row["parent_id"],
    )


def _runner(row: dict[str, Any]) -> Runner:
    return Runner(
        row["id"], row["workspace_id"], row["name"], tuple(row["agent_ids"]), row["created_at"]
    )


def _token(row: dict[str, Any]) -> Token:
    return Token(
        token_id=row["id"],
        workspace_id=row["workspace_id"],
        account_id=row["account_id"],
        account_kind=AccountKind(row["account_kind"]) if row["account_kind"] else None,
        runner_id=row["runner_id"],
        label=row["label"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        last_used_at=row["last_used_at"],
        revoked_at=row["revoked_at"],
        replaced_by=row["replaced_by"],
        active=row["active"],
    )


def _after(token: str) -> tuple[datetime.datetime, uuid.UUID]:
    created, key = decode_token(token, 2)
    try:
        return datetime.datetime.fromisoformat(created), uuid.UUID(key)
    except ValueError:
        raise InvalidArgument("page_token is not one this server issued") from None


def _page(
    items: list[T], limit: int, key: Callable[[T], tuple[datetime.datetime | None, uuid.UUID]]
) -> Page[T]:
    """The first `limit` items (one more was read to see if a page follows)."""
    if len(items) <= limit:
        return Page(items)
    created, last = key(items[limit - 1])
    assert created is not None
    return Page(items[:limit], encode_token(created.isoformat(), last))


async def _one(conn: Conn, query: str, row_id: uuid.UUID, what: str) -> dict[str, Any]:
    row = await (await conn.execute(ADMIN[query], {"id": row_id})).fetchone()
    if row is None:
        raise NotFound(f"no {what} {row_id}")
    return row


class AdminStore:
    def __init__(self, db: Database, *, confirm_seconds: float = CONFIRM_SECONDS) -> None:
        self.db = db
        self.confirm_seconds = confirm_seconds

    # --- sign-in --------------------------------------------------------------

    async def sign_in(self, token: str) -> SignIn:
        """Who the token speaks for; UNAUTHENTICATED when it is unknown,
        revoked or expired."""
        if not token:
            raise Unauthenticated("the token is not valid")
        digest = hash_token(token)
        async with self.db.connection() as conn:
            cur = await conn.execute(ADMIN["sign_in"], {"token_hash": digest})
            row = await cur.fetchone()
        if row is None:
            raise Unauthenticated("the token is not valid")
        if row["revoked"]:
            raise Unauthenticated("the token was revoked")
        if row["deactivated"]:
            raise Unauthenticated("the account is deactivated")
        if row["via"] == "link":
            raise Unauthenticated("the token is not valid")
        expires_in = row["expires_in"]
        if expires_in is not None and expires_in <= 0:
            raise Unauthenticated("the token has expired")
        principal: Actor | RunnerPrincipal
        if row["runner_id"] is not None:
            principal = RunnerPrincipal(row["workspace_id"], row["runner_id"], digest)
        else:
            principal = Actor(
                row["workspace_id"], row["account_id"], AccountKind(row["kind"]), digest
            )
        return SignIn(principal, row["token_id"], expires_in, row["via"])

    async def token_states(self, token_ids: list[uuid.UUID]) -> dict[uuid.UUID, float | None]:
        """Seconds each token still signs in for (None: no expiry); revoked,
        expired and unknown tokens are missing. A server's check of the
        streams it holds, in every workspace: maintenance."""
        async with self.db.maintenance() as conn:
            cur = await conn.execute(ADMIN["token_states"], {"ids": token_ids})
            return {r["id"]: r["expires_in"] for r in await cur.fetchall()}

    async def who_am_i(self, sign_in: SignIn) -> Identity:
        p = sign_in.principal
        async with self.db.tx(p) as conn:
            ws = await (await conn.execute(ADMIN["get_workspace"])).fetchone()
            principal: Account | Runner
            if isinstance(p, Actor):
                principal = await self._get_account(conn, p.account_id)
            else:
                principal = await self._get_runner(conn, p.runner_id)
            token = await self._get_token(conn, sign_in.token_id)
        if ws is None:
            raise NotFound(f"no workspace {p.workspace_id}")
        return Identity(Workspace(ws["id"], ws["name"]), principal, token)

    # --- who may --------------------------------------------------------------

    async def admit(self, conn: Conn, by: Asker) -> None:
        if isinstance(by, Operator):
            return
        row = await (await conn.execute(ADMIN["role_of"], {"id": by.account_id})).fetchone()
        if row is None or row["role"] != Role.ADMIN:
            raise PermissionDenied("only an admin of the workspace may do this")

    async def _lock_workspace(self, conn: Conn, workspace_id: uuid.UUID) -> None:
        if await (await conn.execute(ADMIN["lock_workspace"])).fetchone() is None:
            raise NotFound(f"no workspace {workspace_id}")

    # --- accounts ---------------------------------------------------------------

    async def _get_account(self, conn: Conn, account_id: uuid.UUID) -> Account:
        return _account(await _one(conn, "get_account", account_id, "account"))

    async def _oldest_first(
        self,
        by: Asker,
        query: str,
        size: int,
        page_token: str,
        make: Callable[[dict[str, Any]], T],
        key: Callable[[T], tuple[datetime.datetime | None, uuid.UUID]],
    ) -> Page[T]:
        limit = page_size(size)
        after = _after(page_token) if page_token else (_EPOCH, uuid.UUID(int=0))
        async with self.db.tx(by) as conn:
            await self.admit(conn, by)
            cur = await conn.execute(
                ADMIN[query], {"after_created": after[0], "after_id": after[1], "limit": limit + 1}
            )
            items = [make(r) for r in await cur.fetchall()]
        return _page(items, limit, key)

    async def list_accounts(self, by: Asker, size: int, page_token: str) -> Page[Account]:
        return await self._oldest_first(
            by, "list_accounts", size, page_token, _account, lambda a: (a.created_at, a.account_id)
        )

    async def create_account(
        self,
        by: Asker,
        handle: str,
        kind: AccountKind,
        owner_id: uuid.UUID | None = None,
        role: Role = Role.MEMBER,
        label: str = "",
        expires_in: datetime.timedelta | None = None,
        parent_id: uuid.UUID | None = None,
    ) -> tuple[Account, IssuedToken]:
        """The account and its first token. The first human of a workspace is
        its admin whatever `role` says; an agent is always a member. An agent
        with a parent takes the parent's owner when none is named."""
        _text(handle, "a handle", MAX_HANDLE_CHARS)
        if kind is AccountKind.HUMAN and (owner_id is not None or parent_id is not None):
            raise InvalidArgument("a human has no owner and no parent")
        if kind is AccountKind.AGENT and owner_id is None and parent_id is None:
            raise InvalidArgument("an agent needs an owning human (or a parent agent)")
        if kind is AccountKind.AGENT and role is Role.ADMIN:
            raise InvalidArgument("an agent is always a member")
        _text(label, "a token label", MAX_LABEL_CHARS, required=False)
        _lifetime(expires_in, "a token's expiry")
        async with self.db.tx(by) as conn:
            await self.admit(conn, by)
            if kind is AccountKind.HUMAN:
                await self._lock_workspace(conn, by.workspace_id)
                humans = await (await conn.execute(ADMIN["has_human"])).fetchone()
                if humans is not None and not humans["found"]:
                    role = Role.ADMIN
            else:
                if parent_id is not None:
                    parent = await self._agent(conn, parent_id)
                    owner_id = owner_id or parent.owner_id
                owner = await (
                    await conn.execute(ADMIN["get_account"], {"id": owner_id})
                ).fetchone()
                if owner is None or owner["kind"] != AccountKind.HUMAN:
                    raise InvalidArgument("the owner must be a human of the same workspace")
            account = await self._insert_account(
                conn, by.workspace_id, handle, kind, owner_id, role, parent_id
            )
            issued = await self._issue(conn, account.account_id, None, label, expires_in)
        return account, issued

    async def _insert_account(
        self,
        conn: Conn,
        workspace_id: uuid.UUID,
        handle: str,
        kind: AccountKind,
        owner_id: uuid.UUID | None,
        role: Role,
        parent_id: uuid.UUID | None,
    ) -> Account:
        try:
            row = await (
                await conn.execute(
                    ADMIN["insert_account"],
                    {
                        "id": uuid.uuid4(),
                        "handle": handle,
                        "kind": kind.value,
                        "owner_id": owner_id,
                        "role": role.value,
                        "parent_id": parent_id,
                    },
                )
            ).fetchone()
        except psycopg.errors.UniqueViolation:
            raise Conflict(f"handle {quoted(handle)} is taken in this workspace") from None
        except psycopg.errors.ForeignKeyViolation:
            raise NotFound(f"no workspace {workspace_id}") from None
        except psycopg.Error as exc:
            refusal = tree_refusal(exc)
            if refusal is None:
                raise
            raise refusal from None
        assert row is not None
        if kind is AccountKind.AGENT:
            await conn.execute(ADMIN["start_lane"], {"agent_id": row["id"]})
        return _account(row)

    async def spawn_agent(self, by: Actor, handle: str) -> Account:
        """A sub-agent of the calling agent: the same owner, the caller its
        parent, assigned to the runner whose session the caller is, so that
        runner can bind it at once."""
        if by.kind is not AccountKind.AGENT or by.runner_id is None:
            raise PermissionDenied("only an agent in a runner's session spawns sub-agents")
        _text(handle, "a handle", MAX_HANDLE_CHARS)
        async with self.db.tx(by) as conn:
            parent = await self._agent(conn, by.account_id)
            account = await self._insert_account(
                conn,
                by.workspace_id,
                handle,
                AccountKind.AGENT,
                parent.owner_id,
                Role.MEMBER,
                by.account_id,
            )
            await conn.execute(
                ADMIN["assign_agent"],
                {"runner_id": by.runner_id, "agent_id": account.account_id},
            )
        return account

    async def reparent_agent(
        self, by: Asker, agent_id: uuid.UUID, parent_id: uuid.UUID | None
    ) -> Account:
        """Puts the agent, with every agent below it, under `parent_id` (None:
        makes it a root). From the commit on, it and they take part in the new
        chain's channels and no longer in the old chain's, in every read,
        write and open stream."""
        async with self.db.tx(by) as conn:
            await self.admit(conn, by)
            await self._agent(conn, agent_id)
            if parent_id is not None:
                await self._agent(conn, parent_id)
            try:
                await conn.execute(
                    ADMIN["reparent_agent"], {"agent_id": agent_id, "parent_id": parent_id}
                )
            except psycopg.Error as exc:
                refusal = tree_refusal(exc)
                if refusal is None:
                    raise
                raise refusal from None
            return await self._get_account(conn, agent_id)

    async def set_role(self, by: Asker, account_id: uuid.UUID, role: Role) -> Account:
        async with self.db.tx(by) as conn:
            await self.admit(conn, by)
            await self._lock_workspace(conn, by.workspace_id)
            account = await self._get_account(conn, account_id)
            if account.role is role:
                return account
            if account.kind is AccountKind.AGENT:
                raise InvalidArgument("an agent is always a member")
            if role is Role.MEMBER:
                admins = await (await conn.execute(ADMIN["count_admins"])).fetchone()
                if admins is not None and admins["n"] <= 1:
                    raise FailedPrecondition(
                        "this is the workspace's last admin; make another admin first"
                    )
            row = await (
                await conn.execute(ADMIN["set_role"], {"id": account_id, "role": role.value})
            ).fetchone()
        assert row is not None
        return _account(row)

    # --- runners and assignments --------------------------------------------------

    async def _get_runner(self, conn: Conn, runner_id: uuid.UUID) -> Runner:
        return _runner(await _one(conn, "get_runner", runner_id, "runner"))

    async def list_runners(self, by: Asker, size: int, page_token: str) -> Page[Runner]:
        return await self._oldest_first(
            by, "list_runners", size, page_token, _runner, lambda r: (r.created_at, r.runner_id)
        )

    async def create_runner(
        self,
        by: Asker,
        name: str,
        label: str = "",
        expires_in: datetime.timedelta | None = None,
    ) -> tuple[Runner, IssuedToken]:
        _text(name, "a runner name", MAX_RUNNER_NAME_CHARS)
        _text(label, "a token label", MAX_LABEL_CHARS, required=False)
        _lifetime(expires_in, "a token's expiry")
        runner_id = uuid.uuid4()
        async with self.db.tx(by) as conn:
            await self.admit(conn, by)
            try:
                await conn.execute(ADMIN["insert_runner"], {"id": runner_id, "name": name})
            except psycopg.errors.ForeignKeyViolation:
                raise NotFound(f"no workspace {by.workspace_id}") from None
            issued = await self._issue(conn, None, runner_id, label, expires_in)
            runner = await self._get_runner(conn, runner_id)
        return runner, issued

    async def _agent(self, conn: Conn, agent_id: uuid.UUID) -> Account:
        row = await (await conn.execute(ADMIN["get_account"], {"id": agent_id})).fetchone()
        if row is None or row["kind"] != AccountKind.AGENT:
            raise NotFound(f"no agent {agent_id} in this workspace")
        return _account(row)

    async def assign_agent(self, by: Asker, runner_id: uuid.UUID, agent_id: uuid.UUID) -> Runner:
        async with self.db.tx(by) as conn:
            await self.admit(conn, by)
            await self._get_runner(conn, runner_id)
            await self._agent(conn, agent_id)
            await conn.execute(
                ADMIN["assign_agent"], {"runner_id": runner_id, "agent_id": agent_id}
            )
            return await self._get_runner(conn, runner_id)

    async def unassign_agent(
        self, by: Asker, runner_id: uuid.UUID, agent_id: uuid.UUID
    ) -> tuple[Runner, int]:
        """Takes the agent from the runner; returns the runner and how many of
        its sessions of the agent were bound (every server unbinds them)."""
        async with self.db.tx(by) as conn:
            await self.admit(conn, by)
            await self._get_runner(conn, runner_id)
            await self._agent(conn, agent_id)
            cur = await conn.execute(
                ADMIN["unassign_agent"], {"runner_id": runner_id, "agent_id": agent_id}
            )
            row = await cur.fetchone()
            assert row is not None
            return await self._get_runner(conn, runner_id), int(row["sessions"])

    # --- tokens ---------------------------------------------------------------------

    async def _get_token(self, conn: Conn, token_id: uuid.UUID) -> Token:
        return _token(await _one(conn, "get_token", token_id, "token"))

    async def _issue(
        self,
        conn: Conn,
        account_id: uuid.UUID | None,
        runner_id: uuid.UUID | None,
        label: str,
        expires_in: datetime.timedelta | None,
    ) -> IssuedToken:
        secret = new_token("cpr" if runner_id is not None else "cpa")
        token_id = uuid.uuid4()
        await conn.execute(
            ADMIN["insert_token"],
            {
                "token_hash": hash_token(secret),
                "id": token_id,
                "account_id": account_id,
                "runner_id": runner_id,
                "label": label,
                "expires_in": expires_in,
            },
        )
        return IssuedToken(secret, await self._get_token(conn, token_id))

    async def list_tokens(
        self,
        by: Asker,
        account_id: uuid.UUID | None,
        runner_id: uuid.UUID | None,
        include_inactive: bool,
        size: int,
        page_token: str,
    ) -> Page[Token]:
        limit = page_size(size)
        before = _after(page_token) if page_token else (_END, uuid.UUID(int=2**128 - 1))
        async with self.db.tx(by) as conn:
            await self.admit(conn, by)
            if account_id is not None:
                await self._get_account(conn, account_id)
            if runner_id is not None:
                await self._get_runner(conn, runner_id)
            cur = await conn.execute(
                ADMIN["list_tokens"],
                {
                    "account_id": account_id,
                    "runner_id": runner_id,
                    "include_inactive": include_inactive,
                    "before_created": before[0],
                    "before_id": before[1],
                    "limit": limit + 1,
                },
            )
            items = [_token(r) for r in await cur.fetchall()]
        return _page(items, limit, lambda t: (t.created_at, t.token_id))

    async def create_token(
        self,
        by: Asker,
        account_id: uuid.UUID | None,
        runner_id: uuid.UUID | None,
        label: str = "",
        expires_in: datetime.timedelta | None = None,
    ) -> IssuedToken:
        if (account_id is None) == (runner_id is None):
            raise InvalidArgument("a token is for exactly one of account_id and runner_id")
        _text(label, "a token label", MAX_LABEL_CHARS, required=False)
        _lifetime(expires_in, "a token's expiry")
        async with self.db.tx(by) as conn:
            await self.admit(conn, by)
            if account_id is not None:
                await self._get_account(conn, account_id)
            else:
                assert runner_id is not None
                await self._get_runner(conn, runner_id)
            return await self._issue(conn, account_id, runner_id, label, expires_in)

    async def revoke_token(self, by: Asker, token_id: uuid.UUID) -> Token:
        """Revokes the token; a revoked one stays as it is."""
        async with self.db.tx(by) as conn:
            await self.admit(conn, by)
            revoked = await (await conn.execute(ADMIN["revoke_token"], {"id": token_id})).fetchone()
            seq = await self._notify_revoked(conn, token_id) if revoked is not None else None
            token = await self._get_token(conn, token_id)
        if seq is not None:
            await self._wait_applied(seq)
        return token

    async def rotate_token(
        self,
        by: Asker,
        token_id: uuid.UUID,
        grace: datetime.timedelta | None = None,
        expires_in: datetime.timedelta | None = None,
    ) -> tuple[IssuedToken, Token]:
        """A new token for the same account or runner, with the same label; the
        old one is revoked now, or expires when `grace` ends. The new one lives
        `expires_in`, else as long as the old one did (forever if it had no
        expiry). Returns the new token and the old as it now stands."""
        grace = grace or datetime.timedelta(0)
        if grace < datetime.timedelta(0) or grace > MAX_GRACE:
            raise InvalidArgument(f"a grace period is 0 to {MAX_GRACE.days} days")
        _lifetime(expires_in, "a token's expiry")
        async with self.db.tx(by) as conn:
            await self.admit(conn, by)
            old = await (await conn.execute(ADMIN["lock_token"], {"id": token_id})).fetchone()
            if old is None:
                raise NotFound(f"no token {token_id}")
            if old["kind"] == "hook":
                raise FailedPrecondition(
                    f"token {token_id} is a hook token, which can't be rotated; make a new one "
                    "(CreateHookToken) and revoke this one"
                )
            if not old["active"]:
                raise FailedPrecondition(
                    f"token {token_id} is revoked or expired; create a new one instead"
                )
            if expires_in is None and old["expires_at"] is not None:
                expires_in = old["expires_at"] - old["created_at"]
            issued = await self._issue(
                conn, old["account_id"], old["runner_id"], old["label"], expires_in
            )
            await conn.execute(
                ADMIN["retire_token"],
                {"id": token_id, "replaced_by": issued.token.token_id, "grace": grace},
            )
            seq = await self._notify_revoked(conn, token_id)
            old_token = await self._get_token(conn, token_id)
        await self._wait_applied(seq)
        return issued, old_token

    async def _notify_revoked(self, conn: Conn, token_id: uuid.UUID) -> int:
        row = await (await conn.execute(ADMIN["notify_revoked"], {"token_id": token_id})).fetchone()
        assert row is not None
        return int(row["seq"])

    async def _wait_applied(self, seq: int) -> None:
        """Returns once every live server has dropped the token (or after
        `confirm_seconds`), so the token's next call is refused everywhere."""
        deadline = time.monotonic() + self.confirm_seconds
        while True:
            async with self.db.maintenance() as conn:
                row = await (
                    await conn.execute(ADMIN["unapplied"], {"seq": seq, "live": LIVE})
                ).fetchone()
            if row is None or row["n"] == 0:
                return
            if time.monotonic() >= deadline:
                log.warning(
                    "%d server(s) did not confirm revocation %d within %.1f s",
                    row["n"],
                    seq,
                    self.confirm_seconds,
                )
                return
            await asyncio.sleep(0.005)

    async def applied(self, server_id: uuid.UUID, seq: int | None) -> None:
        """Records that this server applied access notifications up to `seq`
        (None: all sent so far)."""
        async with self.db.maintenance() as conn:
            await conn.execute(ADMIN["applied"], {"id": server_id, "seq": seq})

    # --- the operator's command line ---------------------------------------------------

    async def workspace_of(self, object_id: uuid.UUID) -> uuid.UUID:
        """The workspace an account, runner, token, webhook or delivery id
        belongs to, looked up across workspaces as maintenance: the operator
        names ids, not workspaces."""
        async with self.db.maintenance() as conn:
            cur = await conn.execute(ADMIN["workspace_of"], {"id": object_id})
            row = await cur.fetchone()
        if row is None or row["workspace_id"] is None:
            raise NotFound(f"no account, runner, token, webhook or delivery {object_id}")
        return row["workspace_id"]  # type: ignore[no-any-return]
