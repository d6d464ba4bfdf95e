"""Workspaces, accounts and runners, as the store's other rooms need them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from compass_server.store.admin import AdminStore
from compass_server.store.db import Conn, Database, queries
from compass_server.store.errors import (
    InvalidArgument,
    NotFound,
)
from compass_server.store.types import (
    Account,
    AccountKind,
    Actor,
    Operator,
    Runner,
    RunnerPrincipal,
    Scope,
    Workspace,
)

ACCOUNTS = queries("accounts")
CHANNELS = queries("channels")

MAX_ACCOUNT_IDS = 200


def _account(row: dict[str, Any]) -> Account:
    return Account(
        row["id"],
        row["workspace_id"],
        row["handle"],
        AccountKind(row["kind"]),
        row["owner_id"],
        parent_id=row["parent_id"],
    )


async def require_accounts(conn: Conn, ids: Sequence[uuid.UUID]) -> None:
    """NOT_FOUND naming the first id that is no account of the workspace."""
    cur = await conn.execute(CHANNELS["accounts_exist"], {"ids": list(ids)})
    found = {r["id"] for r in await cur.fetchall()}
    for account_id in ids:
        if account_id not in found:
            raise NotFound(f"no account {account_id}")


class Accounts:
    """Workspaces, accounts and runners."""

    db: Database
    admin: AdminStore

    async def create_workspace(self, name: str) -> Workspace:
        if not name.strip():
            raise InvalidArgument("a workspace needs a name")
        ws = Workspace(workspace_id=uuid.uuid4(), name=name)
        async with self.db.tx(Operator(ws.workspace_id)) as conn:
            await conn.execute(ACCOUNTS["insert_workspace"], {"id": ws.workspace_id, "name": name})
        return ws

    async def create_account(
        self,
        workspace_id: uuid.UUID,
        handle: str,
        kind: AccountKind,
        owner_id: uuid.UUID | None = None,
    ) -> tuple[Account, str]:
        """The operator's shortcut to AdminStore.create_account: the account
        and its token, shown this once."""
        account, issued = await self.admin.create_account(
            Operator(workspace_id), handle, kind, owner_id
        )
        return account, issued.secret

    async def create_runner(self, workspace_id: uuid.UUID, name: str) -> tuple[Runner, str]:
        runner, issued = await self.admin.create_runner(Operator(workspace_id), name)
        return runner, issued.secret

    async def assign_agent(
        self, workspace_id: uuid.UUID, runner_id: uuid.UUID, agent_id: uuid.UUID
    ) -> None:
        await self.admin.assign_agent(Operator(workspace_id), runner_id, agent_id)

    async def runner_agents(self, runner: RunnerPrincipal) -> list[tuple[uuid.UUID, str]]:
        async with self.db.tx(runner) as conn:
            cur = await conn.execute(ACCOUNTS["runner_agents"], {"runner_id": runner.runner_id})
            return [(r["id"], r["handle"]) for r in await cur.fetchall()]

    async def get_account(self, scope: Scope, account_id: uuid.UUID) -> Account:
        async with self.db.tx(scope) as conn:
            row = await (await conn.execute(ACCOUNTS["get_account"], {"id": account_id})).fetchone()
        if row is None:
            raise NotFound(f"no account {account_id}")
        return _account(row)

    async def get_accounts(self, actor: Actor, ids: Sequence[uuid.UUID]) -> list[Account]:
        """Accounts of the actor's workspace, in the order asked; unknown ids
        are left out."""
        if len(ids) > MAX_ACCOUNT_IDS:
            raise InvalidArgument(
                f"{len(ids)} account ids; at most {MAX_ACCOUNT_IDS} are looked up at once"
            )
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(ACCOUNTS["accounts_by_id"], {"ids": list(ids)})
            found = {r["id"]: _account(r) for r in await cur.fetchall()}
        return [found[i] for i in dict.fromkeys(ids) if i in found]
