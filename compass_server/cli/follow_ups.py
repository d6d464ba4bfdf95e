"""`compass-server admin` commands for the follow-up policy an ask takes in a
workspace or a channel when it is posted without its own."""

from __future__ import annotations

import argparse
from typing import Any

from compass_server.cli.admin import Action, Handler
from compass_server.cli.arguments import an_id
from compass_server.store import Store
from compass_server.store.blocks import follow_up_default
from compass_server.store.errors import InvalidArgument
from compass_server.store.types import FollowUp, Operator

ACTIONS = {
    "set-follow-up-default": "sets a workspace's or channel's follow-up default for asks",
    "show-follow-up-default": "shows a workspace's or channel's own follow-up default",
}

_POLICY_HELP = (
    "like remind=30m,times=2,escalate=4h,owner; none: no follow-ups; "
    "inherit: none of its own (the channel takes the workspace's, the workspace the server's)"
)


def add_parsers(action: Action) -> None:
    for name in ACTIONS:
        p = action(name)
        where = p.add_mutually_exclusive_group(required=True)
        where.add_argument("--workspace", type=an_id, metavar="ID", help="the workspace")
        where.add_argument("--channel", type=an_id, metavar="ID", help="the channel")
        if name == "set-follow-up-default":
            p.add_argument("--policy", required=True, metavar="POLICY", help=_POLICY_HELP)


def _policy(text: str) -> FollowUp | None:
    if text.strip() == "inherit":
        return None
    if text.strip() == "none":
        return FollowUp()
    parsed = follow_up_default(text)
    if parsed is None:
        raise ValueError("the policy is empty; say none or inherit")
    return parsed


def _shown(where: dict[str, str], policy: FollowUp | None) -> dict[str, Any]:
    if policy is None:
        return {**where, "follow_up": None, "inherits": True}
    out: dict[str, Any] = {}
    if policy.remind_after is not None:
        out["remind_after_seconds"] = policy.remind_after.total_seconds()
        out["remind_times"] = policy.remind_times
    if policy.escalate_after is not None:
        out["escalate_after_seconds"] = policy.escalate_after.total_seconds()
        out["escalate_to_owner"] = policy.escalate_to_owner
    return {**where, "follow_up": out, "inherits": False}


async def _set(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    try:
        policy = _policy(args.policy)
    except ValueError as exc:
        raise InvalidArgument(f"--policy: {exc}") from None
    if args.workspace is not None:
        by = Operator(args.workspace)
        stored = await store.set_workspace_follow_up_default(by, policy)
        return _shown({"workspace_id": str(args.workspace)}, stored)
    by = Operator(await store.channel_workspace(args.channel))
    stored = await store.set_channel_follow_up_default(by, args.channel, policy)
    return _shown({"channel_id": str(args.channel)}, stored)


async def _show(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    if args.workspace is not None:
        stored = await store.workspace_follow_up_default(Operator(args.workspace))
        return _shown({"workspace_id": str(args.workspace)}, stored)
    by = Operator(await store.channel_workspace(args.channel))
    stored = await store.channel_follow_up_default(by, args.channel)
    return _shown({"channel_id": str(args.channel)}, stored)


HANDLERS: dict[str, Handler] = {
    "set-follow-up-default": _set,
    "show-follow-up-default": _show,
}
