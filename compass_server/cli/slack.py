"""`compass-server admin` commands for a workspace's Slack app. The bot
token and signing secret are read from files or from SLACK_BOT_TOKEN and
SLACK_SIGNING_SECRET, never from the command line (where `ps` and shell
history would show them)."""

from __future__ import annotations

import argparse
import os
import pathlib
from typing import Any

from compass.v1 import admin_pb2 as ad
from compass_server.cli.admin import Action, Handler, operator_of
from compass_server.cli.arguments import an_id
from compass_server.cli.output import plain
from compass_server.store import Store
from compass_server.store.errors import InvalidArgument
from compass_server.store.types import Operator

ACTIONS = {
    "connect-slack-app": "connects a Slack app (token and secret from files or the environment)",
    "list-slack-apps": "lists a workspace's Slack apps, their channels and how sending goes",
    "disconnect-slack-app": "disconnects a Slack app; its messages in Slack stay",
    "map-slack-channel": "posts a channel's asks to a Slack channel",
    "unmap-slack-channel": "stops posting a channel's asks to Slack",
}


def add_parsers(action: Action) -> None:
    connect = action("connect-slack-app")
    connect.add_argument(
        "--workspace", required=True, type=an_id, metavar="ID", help="the workspace"
    )
    connect.add_argument("--team", required=True, metavar="TEAM_ID", help="the Slack team's id")
    connect.add_argument(
        "--bot-token-file", type=pathlib.Path, metavar="FILE", help="default: $SLACK_BOT_TOKEN"
    )
    connect.add_argument(
        "--signing-secret-file",
        type=pathlib.Path,
        metavar="FILE",
        help="default: $SLACK_SIGNING_SECRET",
    )
    connect.add_argument(
        "--email-match",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="link a Slack user whose verified email is a person's (default: off)",
    )
    listed = action("list-slack-apps")
    listed.add_argument(
        "--workspace", required=True, type=an_id, metavar="ID", help="the workspace"
    )
    gone = action("disconnect-slack-app")
    gone.add_argument("app_id", type=an_id, metavar="APP_ID", help="the app's id")
    mapped = action("map-slack-channel")
    unmapped = action("unmap-slack-channel")
    for p in (mapped, unmapped):
        p.add_argument("--app", required=True, type=an_id, metavar="APP_ID", help="the app")
        p.add_argument(
            "--channel", required=True, type=an_id, metavar="ID", help="the Compass channel"
        )
    mapped.add_argument(
        "--slack-channel", required=True, metavar="SLACK_ID", help="the Slack channel's id"
    )


def _secret(path: pathlib.Path | None, env: str, flag: str) -> str:
    if path is not None:
        try:
            return path.read_text().strip()
        except OSError as exc:
            raise InvalidArgument(f"can't read {flag} {path}: {exc.strerror}") from None
    value = os.environ.get(env, "").strip()
    if not value:
        raise InvalidArgument(f"give {flag} or set {env}")
    return value


async def _connect(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.connect_slack_app(
        Operator(args.workspace),
        ad.ConnectSlackAppRequest(
            team_id=args.team,
            bot_token=_secret(args.bot_token_file, "SLACK_BOT_TOKEN", "--bot-token-file"),
            signing_secret=_secret(
                args.signing_secret_file, "SLACK_SIGNING_SECRET", "--signing-secret-file"
            ),
            email_match=args.email_match,
        ),
    )
    return plain(r.app)


async def _list(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.list_slack_apps(Operator(args.workspace), ad.ListSlackAppsRequest())
    return {"apps": [plain(a) for a in r.apps]}


async def _disconnect(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    await args.admin_api.disconnect_slack_app(
        await operator_of(store, args.app_id), ad.DisconnectSlackAppRequest(app_id=str(args.app_id))
    )
    return {"app_id": str(args.app_id), "disconnected": True}


async def _map(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.map_slack_channel(
        await operator_of(store, args.app),
        ad.MapSlackChannelRequest(
            app_id=str(args.app), channel_id=str(args.channel), slack_channel=args.slack_channel
        ),
    )
    return plain(r.app)


async def _unmap(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.unmap_slack_channel(
        await operator_of(store, args.app),
        ad.UnmapSlackChannelRequest(app_id=str(args.app), channel_id=str(args.channel)),
    )
    return plain(r.app)


HANDLERS: dict[str, Handler] = {
    "connect-slack-app": _connect,
    "list-slack-apps": _list,
    "disconnect-slack-app": _disconnect,
    "map-slack-channel": _map,
    "unmap-slack-channel": _unmap,
}
