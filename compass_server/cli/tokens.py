"""`compass-server admin` commands for tokens: list, issue, revoke, rotate."""

from __future__ import annotations

import argparse
import pathlib
from typing import Any

from compass.v1 import admin_pb2 as ad
from compass_server.api.admin import AdminApi
from compass_server.cli.admin import Action, Handler, every_page, operator_of, wire_duration
from compass_server.cli.arguments import an_id, duration, token_flags
from compass_server.cli.output import plain
from compass_server.store import Store
from compass_server.store.errors import InvalidArgument
from compass_server.store.types import Operator

ACTIONS = {
    "list-tokens": "lists tokens (never their secrets), newest first",
    "create-token": "issues another token for an account or a runner",
    "create-hook-token": "issues a hook token: an agent's harness hooks ask in a channel with it",
    "revoke-token": "refuses a token from now on, on every server",
    "rotate-token": "replaces a token with a new secret; the old one ends",
}


def add_parsers(action: Action) -> None:
    tokens = action("list-tokens")
    whose = tokens.add_mutually_exclusive_group(required=True)
    whose.add_argument("--workspace", type=an_id, metavar="ID", help="every token of a workspace")
    whose.add_argument("--account", type=an_id, metavar="ID", help="an account's tokens")
    whose.add_argument("--runner", type=an_id, metavar="ID", help="a runner's tokens")
    tokens.add_argument("--all", action="store_true", help="also revoked and expired tokens")
    create = action("create-token")
    owner = create.add_mutually_exclusive_group(required=True)
    owner.add_argument(
        "--account", type=an_id, metavar="ID", help="the account the token signs in as"
    )
    owner.add_argument(
        "--runner", type=an_id, metavar="ID", help="the runner the token signs in as"
    )
    token_flags(create)
    hook_token = action("create-hook-token")
    hook_token.add_argument(
        "--agent",
        required=True,
        type=an_id,
        metavar="ID",
        help="the agent whose harness's hooks ask",
    )
    hook_token.add_argument(
        "--channel", required=True, type=an_id, metavar="ID", help="where its asks are posted"
    )
    hook_token.add_argument(
        "--policy",
        type=pathlib.Path,
        metavar="FILE",
        help="the policy (TOML) of who answers what (default: anyone in the channel, each request)",
    )
    token_flags(hook_token)
    revoke = action("revoke-token")
    revoke.add_argument("token_id", type=an_id, metavar="TOKEN_ID", help="the token's id")
    rotate = action("rotate-token")
    rotate.add_argument("token_id", type=an_id, metavar="TOKEN_ID", help="the token's id")
    rotate.add_argument(
        "--grace",
        type=duration,
        metavar="DURATION",
        help="how long the old token keeps working (default: it is revoked at once)",
    )
    rotate.add_argument(
        "--expires-in",
        type=duration,
        metavar="DURATION",
        help="the new token's lifetime (default: as long as the old one's)",
    )


async def _list_tokens(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    api = AdminApi(store.admin)
    by = (
        Operator(args.workspace)
        if args.workspace
        else await operator_of(store, args.account or args.runner)
    )
    return await every_page(
        lambda t: api.list_tokens(
            by,
            ad.ListTokensRequest(
                account_id=str(args.account or ""),
                runner_id=str(args.runner or ""),
                include_inactive=args.all,
                page_size=200,
                page_token=t,
            ),
        ),
        "tokens",
    )


async def _create_token(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await AdminApi(store.admin).create_token(
        await operator_of(store, args.account or args.runner),
        ad.CreateTokenRequest(
            account_id=str(args.account or ""),
            runner_id=str(args.runner or ""),
            label=args.label,
            expires_in=wire_duration(args.expires_in),
        ),
    )
    return {**plain(r.token_info), "token": r.token}


async def _create_hook_token(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    try:
        policy = args.policy.read_text(encoding="utf-8") if args.policy else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"can't read the policy file {args.policy}: {exc}") from None
    r = await AdminApi(store.admin).create_hook_token(
        await operator_of(store, args.agent),
        ad.CreateHookTokenRequest(
            agent_account_id=str(args.agent),
            channel_id=str(args.channel),
            policy=policy,
            label=args.label,
            expires_in=wire_duration(args.expires_in),
        ),
    )
    return {**plain(r.token_info), "token": r.token, "rules": list(r.rules)}


async def _revoke_token(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await AdminApi(store.admin).revoke_token(
        await operator_of(store, args.token_id),
        ad.RevokeTokenRequest(token_id=str(args.token_id)),
    )
    return plain(r.token_info)


async def _rotate_token(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await AdminApi(store.admin).rotate_token(
        await operator_of(store, args.token_id),
        ad.RotateTokenRequest(
            token_id=str(args.token_id),
            grace=wire_duration(args.grace),
            expires_in=wire_duration(args.expires_in),
        ),
    )
    return {**plain(r.token_info), "token": r.token, "old_token": plain(r.old_token_info)}


HANDLERS: dict[str, Handler] = {
    "list-tokens": _list_tokens,
    "create-token": _create_token,
    "create-hook-token": _create_hook_token,
    "revoke-token": _revoke_token,
    "rotate-token": _rotate_token,
}
