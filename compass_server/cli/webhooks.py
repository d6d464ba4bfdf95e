"""`compass-server admin` commands for webhooks and their deliveries."""

from __future__ import annotations

import argparse
from typing import Any

from compass.v1 import admin_pb2 as ad
from compass_server.cli.admin import Action, Handler, every_page, operator_of, wire_duration
from compass_server.cli.arguments import an_id, count, duration
from compass_server.cli.output import plain
from compass_server.store import Store
from compass_server.store.types import Operator, WebhookEventType

ACTIONS = {
    "create-webhook": "a webhook endpoint; prints its id and signing secret",
    "list-webhooks": "lists a workspace's webhooks (never their secrets)",
    "disable-webhook": "stops making deliveries for a webhook",
    "enable-webhook": "resumes a webhook, from the events of now on",
    "delete-webhook": "deletes a webhook with its deliveries",
    "rotate-webhook-secret": "a new signing secret; the old one signs during --grace",
    "list-deliveries": "lists a webhook's deliveries, newest first",
    "list-attempts": "a delivery, every attempt at it and its body",
    "redeliver": "sends a delivery again now, with the same webhook-id",
}


def add_parsers(action: Action) -> None:
    hook = action("create-webhook")
    hook.add_argument(
        "--workspace",
        required=True,
        type=an_id,
        metavar="ID",
        help="the workspace whose events it takes",
    )
    hook.add_argument("--url", required=True, metavar="URL", help="where deliveries are posted")
    hook.add_argument(
        "--kind",
        choices=["standard", "slack", "email", "push"],
        default="standard",
        help="default standard",
    )
    hook.add_argument(
        "--events",
        default="",
        metavar="TYPE,…",
        help="event types it takes, comma-separated (default: all): "
        + ", ".join(t.value for t in WebhookEventType),
    )
    hooks = action("list-webhooks")
    hooks.add_argument("--workspace", required=True, type=an_id, metavar="ID", help="the workspace")
    for name in ("disable-webhook", "enable-webhook", "delete-webhook"):
        action(name).add_argument(
            "webhook_id", type=an_id, metavar="WEBHOOK_ID", help="the webhook's id"
        )
    rotate_secret = action("rotate-webhook-secret")
    rotate_secret.add_argument(
        "webhook_id", type=an_id, metavar="WEBHOOK_ID", help="the webhook's id"
    )
    rotate_secret.add_argument(
        "--grace",
        type=duration,
        metavar="DURATION",
        help="how long the old secret keeps signing beside the new one (default 1d; 0: none)",
    )
    deliveries = action("list-deliveries")
    deliveries.add_argument(
        "--webhook", required=True, type=an_id, metavar="ID", help="the webhook"
    )
    deliveries.add_argument(
        "--state", choices=["pending", "delivered", "failed"], help="only these (default: all)"
    )
    deliveries.add_argument(
        "--limit", type=count, default=50, metavar="N", help="at most 200 (default 50)"
    )
    deliveries.add_argument(
        "--page-token",
        default="",
        metavar="TOKEN",
        help="the next_page_token of the page before",
    )
    for name in ("list-attempts", "redeliver"):
        action(name).add_argument(
            "delivery_id", type=an_id, metavar="DELIVERY_ID", help="the delivery's id"
        )


async def _create_webhook(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.create_webhook(
        Operator(args.workspace),
        ad.CreateWebhookRequest(
            url=args.url,
            kind={
                "slack": ad.WEBHOOK_KIND_SLACK,
                "email": ad.WEBHOOK_KIND_EMAIL,
                "push": ad.WEBHOOK_KIND_PUSH,
            }.get(args.kind, ad.WEBHOOK_KIND_STANDARD),
            event_types=[t for t in args.events.split(",") if t.strip()],
        ),
    )
    return {**plain(r.webhook), "secret": r.secret}


async def _list_webhooks(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    api, by = args.admin_api, Operator(args.workspace)
    return await every_page(
        lambda t: api.list_webhooks(by, ad.ListWebhooksRequest(page_size=200, page_token=t)),
        "webhooks",
    )


async def _disable_webhook(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.disable_webhook(
        await operator_of(store, args.webhook_id),
        ad.DisableWebhookRequest(webhook_id=str(args.webhook_id)),
    )
    return plain(r.webhook)


async def _enable_webhook(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.enable_webhook(
        await operator_of(store, args.webhook_id),
        ad.EnableWebhookRequest(webhook_id=str(args.webhook_id)),
    )
    return plain(r.webhook)


async def _delete_webhook(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    await args.admin_api.delete_webhook(
        await operator_of(store, args.webhook_id),
        ad.DeleteWebhookRequest(webhook_id=str(args.webhook_id)),
    )
    return {"webhook_id": str(args.webhook_id), "deleted": True}


async def _rotate_webhook_secret(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.rotate_webhook_secret(
        await operator_of(store, args.webhook_id),
        ad.RotateWebhookSecretRequest(
            webhook_id=str(args.webhook_id), grace=wire_duration(args.grace)
        ),
    )
    return {**plain(r.webhook), "secret": r.secret}


async def _list_deliveries(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    states = {
        "pending": ad.WEBHOOK_DELIVERY_STATE_PENDING,
        "delivered": ad.WEBHOOK_DELIVERY_STATE_DELIVERED,
        "failed": ad.WEBHOOK_DELIVERY_STATE_FAILED,
    }
    r = await args.admin_api.list_webhook_deliveries(
        await operator_of(store, args.webhook),
        ad.ListWebhookDeliveriesRequest(
            webhook_id=str(args.webhook),
            states=[states[args.state]] if args.state else [],
            page_size=args.limit,
            page_token=args.page_token,
        ),
    )
    return {
        "deliveries": [plain(d) for d in r.deliveries],
        "next_page_token": r.next_page_token,
    }


async def _list_attempts(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.get_webhook_delivery(
        await operator_of(store, args.delivery_id),
        ad.GetWebhookDeliveryRequest(delivery_id=str(args.delivery_id)),
    )
    return {
        "delivery": plain(r.delivery),
        "attempts": [plain(a) for a in r.attempts],
        "body": r.body,
    }


async def _redeliver(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.redeliver_webhook_delivery(
        await operator_of(store, args.delivery_id),
        ad.RedeliverWebhookDeliveryRequest(delivery_id=str(args.delivery_id)),
    )
    return plain(r.delivery)


HANDLERS: dict[str, Handler] = {
    "create-webhook": _create_webhook,
    "list-webhooks": _list_webhooks,
    "disable-webhook": _disable_webhook,
    "enable-webhook": _enable_webhook,
    "delete-webhook": _delete_webhook,
    "rotate-webhook-secret": _rotate_webhook_secret,
    "list-deliveries": _list_deliveries,
    "list-attempts": _list_attempts,
    "redeliver": _redeliver,
}
