"""`compass-server admin` commands for workspaces, accounts, runners and the
agents they host."""

from __future__ import annotations

import argparse
from typing import Any

from compass.v1 import admin_pb2 as ad
from compass_server.api.admin import AdminApi
from compass_server.cli.admin import Action, Handler, every_page, operator_of, wire_duration
from compass_server.cli.arguments import an_id, token_flags
from compass_server.cli.output import plain
from compass_server.store import Store
from compass_server.store.types import Operator

ACTIONS = {
    "create-workspace": "a new workspace; prints its id",
    "create-account": "a person or an agent of a workspace; prints its id and token",
    "create-runner": "a runner that hosts agents; prints its id and token",
    "assign-agent": "lets a runner bind an agent of its workspace",
    "unassign-agent": "takes an agent from a runner, unbinding its sessions",
    "reparent-agent": "puts an agent (and those below it) under another agent",
    "set-role": "makes a person an admin or a member",
    "list-accounts": "lists a workspace's accounts",
    "list-runners": "lists a workspace's runners and their agents",
}


def add_parsers(action: Action) -> None:
    def the(p: argparse.ArgumentParser, flag: str, help: str, required: bool = True) -> None:
        p.add_argument(flag, required=required, type=an_id, metavar="ID", help=help)

    ws = action("create-workspace")
    ws.add_argument("name", metavar="NAME", help="the workspace's name")
    acct = action("create-account")
    the(acct, "--workspace", "the workspace it belongs to")
    acct.add_argument(
        "--handle", required=True, metavar="HANDLE", help="its @handle, unique in the workspace"
    )
    acct.add_argument("--kind", required=True, choices=["human", "agent"], help="who it is")
    the(acct, "--owner", "the owning human (agents only)", required=False)
    the(
        acct,
        "--parent",
        "the agent above this one (agents only; its owner is the default --owner)",
        required=False,
    )
    acct.add_argument(
        "--role", choices=["member", "admin"], default="member", help="default member"
    )
    runner = action("create-runner")
    the(runner, "--workspace", "the workspace it belongs to")
    runner.add_argument("--name", required=True, metavar="NAME", help="the runner's name")
    for issuing in (acct, runner):
        token_flags(issuing)
    assign = action("assign-agent")
    the(assign, "--runner", "the runner")
    the(assign, "--agent", "the agent it may bind")
    unassign = action("unassign-agent")
    the(unassign, "--runner", "the runner")
    the(unassign, "--agent", "the agent it no longer binds")
    move = action("reparent-agent")
    the(move, "--agent", "the agent to move")
    the(move, "--parent", "the agent to put it under (default: make it a root)", False)
    role = action("set-role")
    the(role, "--account", "the person")
    role.add_argument("--role", required=True, choices=["member", "admin"], help="their role")
    accounts = action("list-accounts")
    the(accounts, "--workspace", "the workspace")
    runners = action("list-runners")
    the(runners, "--workspace", "the workspace")


async def _create_workspace(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    ws = await store.create_workspace(args.name)
    return {"workspace_id": str(ws.workspace_id)}


async def _create_account(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await AdminApi(store.admin).create_account(
        Operator(args.workspace),
        ad.CreateAccountRequest(
            handle=args.handle,
            kind=ad.PRINCIPAL_KIND_HUMAN if args.kind == "human" else ad.PRINCIPAL_KIND_AGENT,
            owner_account_id=str(args.owner) if args.owner else "",
            parent_account_id=str(args.parent) if args.parent else "",
            role=ad.WORKSPACE_ROLE_ADMIN if args.role == "admin" else ad.WORKSPACE_ROLE_MEMBER,
            token_label=args.label,
            token_expires_in=wire_duration(args.expires_in),
        ),
    )
    return {**plain(r.account), "token": r.token, "token_id": r.token_info.token_id}


async def _create_runner(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await AdminApi(store.admin).create_runner(
        Operator(args.workspace),
        ad.CreateRunnerRequest(
            name=args.name,
            token_label=args.label,
            token_expires_in=wire_duration(args.expires_in),
        ),
    )
    return {**plain(r.runner), "token": r.token, "token_id": r.token_info.token_id}


async def _assign_agent(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    await AdminApi(store.admin).assign_agent(
        await operator_of(store, args.runner),
        ad.AssignAgentRequest(runner_id=str(args.runner), agent_account_id=str(args.agent)),
    )
    return {"runner_id": str(args.runner), "agent_id": str(args.agent)}


async def _unassign_agent(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await AdminApi(store.admin).unassign_agent(
        await operator_of(store, args.runner),
        ad.UnassignAgentRequest(runner_id=str(args.runner), agent_account_id=str(args.agent)),
    )
    return {
        "runner_id": str(args.runner),
        "agent_id": str(args.agent),
        "sessions_unbound": r.sessions_unbound,
    }


async def _reparent_agent(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await AdminApi(store.admin).reparent_agent(
        await operator_of(store, args.agent),
        ad.ReparentAgentRequest(
            agent_account_id=str(args.agent),
            parent_account_id=str(args.parent) if args.parent else "",
        ),
    )
    return plain(r.account)


async def _set_role(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await AdminApi(store.admin).set_account_role(
        await operator_of(store, args.account),
        ad.SetAccountRoleRequest(
            account_id=str(args.account),
            role=ad.WORKSPACE_ROLE_ADMIN if args.role == "admin" else ad.WORKSPACE_ROLE_MEMBER,
        ),
    )
    return plain(r.account)


async def _list_accounts(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    api, by = AdminApi(store.admin), Operator(args.workspace)
    return await every_page(
        lambda t: api.list_accounts(by, ad.ListAccountsRequest(page_size=200, page_token=t)),
        "accounts",
    )


async def _list_runners(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    api, by = AdminApi(store.admin), Operator(args.workspace)
    return await every_page(
        lambda t: api.list_runners(by, ad.ListRunnersRequest(page_size=200, page_token=t)),
        "runners",
    )


HANDLERS: dict[str, Handler] = {
    "create-workspace": _create_workspace,
    "create-account": _create_account,
    "create-runner": _create_runner,
    "assign-agent": _assign_agent,
    "unassign-agent": _unassign_agent,
    "reparent-agent": _reparent_agent,
    "set-role": _set_role,
    "list-accounts": _list_accounts,
    "list-runners": _list_runners,
}
