"""What every admin command shares: the handler's shape, the database it
opens, the workspace an id belongs to, and every page of a list."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from google.protobuf import duration_pb2

from compass_server import config
from compass_server.api.admin import AdminApi
from compass_server.cli.output import plain
from compass_server.startup import open_database, webhook_reach, webhook_vault
from compass_server.store import Store
from compass_server.store.blocks import DeadlineBounds
from compass_server.store.slack import SlackStore
from compass_server.store.types import Operator
from compass_server.store.webhooks import WebhookStore

# An action's handler: what it prints, from the store and its arguments.
Handler = Callable[[Store, argparse.Namespace], Awaitable[dict[str, Any]]]
# Makes the parser of one admin action by its name.
Action = Callable[[str], argparse.ArgumentParser]


async def run(
    handler: Handler, args: argparse.Namespace, settings: config.Settings
) -> dict[str, Any]:
    """One admin action against the configured database."""
    # Never a new embedded database: ids minted there would be unknown to the server.
    db, embedded = await open_database(settings, create=False, min_size=1, max_size=2)
    try:
        store = Store(
            db,
            deadline_bounds=DeadlineBounds(
                datetime.timedelta(seconds=settings.ask_deadline_min_seconds),
                datetime.timedelta(seconds=settings.ask_deadline_max_seconds),
            ),
        )
        vault = webhook_vault(settings, embedded=embedded is not None)
        args.admin_api = AdminApi(
            store.admin,
            webhooks=WebhookStore(db, store.admin, vault),
            reach=webhook_reach(settings),
            people=store,
            slack=SlackStore(db, store.admin, vault),
        )
        args.public_url = settings.public_url
        args.link_max = datetime.timedelta(seconds=settings.signin_link_max_seconds)
        return await handler(store, args)
    finally:
        await db.close()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)


async def operator_of(store: Store, object_id: uuid.UUID) -> Operator:
    """The operator, in the workspace of whatever `object_id` names."""
    return Operator(await store.admin.workspace_of(object_id))


async def every_page(call: Callable[[str], Awaitable[Any]], field: str) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    page_token = ""
    while True:
        page = await call(page_token)
        items.extend(plain(m) for m in getattr(page, field))
        page_token = page.next_page_token
        if not page_token:
            return {field: items}


def wire_duration(value: datetime.timedelta | None) -> duration_pb2.Duration | None:
    if value is None:
        return None
    out = duration_pb2.Duration()
    out.FromTimedelta(value)
    return out
