"""AdminService's webhook operations, for admins over RPC and the operator at
the command line alike (AdminApi takes them in)."""

from __future__ import annotations

import datetime

from compass.v1 import admin_pb2 as ad
from compass_server.api import mapping as wire
from compass_server.notify.email import sender_address
from compass_server.store.admin import Asker
from compass_server.store.errors import FailedPrecondition, InvalidArgument
from compass_server.store.ids import parse_id
from compass_server.store.types import (
    DeliveryState,
    Webhook,
    WebhookAttempt,
    WebhookDelivery,
    WebhookKind,
)
from compass_server.store.webhooks import WebhookStore, event_types
from compass_server.webhooks.destination import Reach

# How long the old secret signs beside the new one when a rotation names no grace.
DEFAULT_SECRET_GRACE = datetime.timedelta(days=1)

_KIND_TO_WIRE = {
    WebhookKind.STANDARD: ad.WEBHOOK_KIND_STANDARD,
    WebhookKind.SLACK: ad.WEBHOOK_KIND_SLACK,
    WebhookKind.EMAIL: ad.WEBHOOK_KIND_EMAIL,
    WebhookKind.SLACK_APP: ad.WEBHOOK_KIND_SLACK_APP,
    WebhookKind.PUSH: ad.WEBHOOK_KIND_PUSH,
}
# A Slack app is connected with ConnectSlackApp, never made as a webhook.
_KIND_FROM_WIRE = {v: k for k, v in _KIND_TO_WIRE.items() if k is not WebhookKind.SLACK_APP}
_STATE_TO_WIRE = {
    DeliveryState.PENDING: ad.WEBHOOK_DELIVERY_STATE_PENDING,
    DeliveryState.DELIVERED: ad.WEBHOOK_DELIVERY_STATE_DELIVERED,
    DeliveryState.FAILED: ad.WEBHOOK_DELIVERY_STATE_FAILED,
}
_STATE_FROM_WIRE = {v: k for k, v in _STATE_TO_WIRE.items()}


def webhook_to_wire(w: Webhook) -> ad.WebhookInfo:
    out = ad.WebhookInfo(
        webhook_id=str(w.webhook_id),
        kind=_KIND_TO_WIRE[w.kind],
        url=w.url_shown,
        event_types=[t.value for t in w.event_types],
        enabled=w.enabled,
        disabled_reason=w.disabled_reason,
        created_at=wire.timestamp(w.created_at),
        pending_deliveries=w.pending,
        failed_deliveries=w.failed,
    )
    if w.disabled_at is not None:
        out.disabled_at.CopyFrom(wire.timestamp(w.disabled_at))
    if w.previous_secret_until is not None:
        out.previous_secret_until.CopyFrom(wire.timestamp(w.previous_secret_until))
    return out


def delivery_to_wire(d: WebhookDelivery) -> ad.WebhookDelivery:
    out = ad.WebhookDelivery(
        delivery_id=str(d.delivery_id),
        webhook_id=str(d.webhook_id),
        event_type=d.event_type.value,
        event_id=d.event_id,
        subject=d.subject,
        state=_STATE_TO_WIRE[d.state],
        attempts=d.attempts,
        created_at=wire.timestamp(d.created_at),
        last_status_code=d.last_status_code or 0,
        last_error=d.last_error,
    )
    if d.next_attempt_at is not None:
        out.next_attempt_at.CopyFrom(wire.timestamp(d.next_attempt_at))
    if d.finished_at is not None:
        out.finished_at.CopyFrom(wire.timestamp(d.finished_at))
    return out


def attempt_to_wire(a: WebhookAttempt) -> ad.WebhookAttempt:
    out = ad.WebhookAttempt(
        attempt=a.n,
        server_id=str(a.server_id),
        started_at=wire.timestamp(a.started_at),
        status_code=a.status_code or 0,
        error=a.error,
        response=a.response,
    )
    if a.finished_at is not None:
        out.finished_at.CopyFrom(wire.timestamp(a.finished_at))
    if a.latency_ms is not None:
        out.latency.FromTimedelta(datetime.timedelta(milliseconds=a.latency_ms))
    return out


class WebhookAdmin:
    """Mixed into AdminApi: `webhooks` is None where no store was given."""

    webhooks: WebhookStore | None
    reach: Reach

    def _store(self) -> WebhookStore:
        if self.webhooks is None:
            raise FailedPrecondition("webhooks are not served here")
        return self.webhooks

    async def create_webhook(
        self, by: Asker, req: ad.CreateWebhookRequest
    ) -> ad.CreateWebhookResponse:
        store = self._store()
        if req.kind == ad.WEBHOOK_KIND_UNSPECIFIED:
            kind = WebhookKind.STANDARD
        elif req.kind in _KIND_FROM_WIRE:
            kind = _KIND_FROM_WIRE[req.kind]
        else:
            raise InvalidArgument(
                "kind must be WEBHOOK_KIND_STANDARD, WEBHOOK_KIND_SLACK, WEBHOOK_KIND_EMAIL "
                "or WEBHOOK_KIND_PUSH"
            )
        types = event_types(req.event_types)
        # Who may ask comes first: the URL check looks the host up.
        await store.admit(by)
        store.keyed()
        if kind in (WebhookKind.EMAIL, WebhookKind.PUSH):
            # A push endpoint's address is its VAPID subject.
            url = sender_address(req.url)
            made = await store.create(by, kind, url, url, types)
        else:
            dest = await self.reach.check(req.url)
            made = await store.create(by, kind, req.url.strip(), dest.shown, types)
        return ad.CreateWebhookResponse(webhook=webhook_to_wire(made.webhook), secret=made.secret)

    async def list_webhooks(
        self, by: Asker, req: ad.ListWebhooksRequest
    ) -> ad.ListWebhooksResponse:
        page = await self._store().list_webhooks(by, req.page_size, req.page_token)
        return ad.ListWebhooksResponse(
            webhooks=[webhook_to_wire(w) for w in page.items], next_page_token=page.next_page_token
        )

    async def disable_webhook(
        self, by: Asker, req: ad.DisableWebhookRequest
    ) -> ad.DisableWebhookResponse:
        webhook = await self._store().set_enabled(by, parse_id(req.webhook_id, "webhook_id"), False)
        return ad.DisableWebhookResponse(webhook=webhook_to_wire(webhook))

    async def enable_webhook(
        self, by: Asker, req: ad.EnableWebhookRequest
    ) -> ad.EnableWebhookResponse:
        webhook = await self._store().set_enabled(by, parse_id(req.webhook_id, "webhook_id"), True)
        return ad.EnableWebhookResponse(webhook=webhook_to_wire(webhook))

    async def delete_webhook(
        self, by: Asker, req: ad.DeleteWebhookRequest
    ) -> ad.DeleteWebhookResponse:
        await self._store().delete(by, parse_id(req.webhook_id, "webhook_id"))
        return ad.DeleteWebhookResponse()

    async def rotate_webhook_secret(
        self, by: Asker, req: ad.RotateWebhookSecretRequest
    ) -> ad.RotateWebhookSecretResponse:
        grace = DEFAULT_SECRET_GRACE
        if req.HasField("grace"):
            if not -(10**12) < req.grace.seconds < 10**12:
                raise InvalidArgument("a duration is out of range")
            grace = req.grace.ToTimedelta()
        made = await self._store().rotate_secret(by, parse_id(req.webhook_id, "webhook_id"), grace)
        return ad.RotateWebhookSecretResponse(
            webhook=webhook_to_wire(made.webhook), secret=made.secret
        )

    async def list_webhook_deliveries(
        self, by: Asker, req: ad.ListWebhookDeliveriesRequest
    ) -> ad.ListWebhookDeliveriesResponse:
        states = []
        for s in req.states:
            if s not in _STATE_FROM_WIRE:
                raise InvalidArgument("states takes PENDING, DELIVERED or FAILED")
            states.append(_STATE_FROM_WIRE[s])
        page = await self._store().list_deliveries(
            by, parse_id(req.webhook_id, "webhook_id"), states, req.page_size, req.page_token
        )
        return ad.ListWebhookDeliveriesResponse(
            deliveries=[delivery_to_wire(d) for d in page.items],
            next_page_token=page.next_page_token,
        )

    async def get_webhook_delivery(
        self, by: Asker, req: ad.GetWebhookDeliveryRequest
    ) -> ad.GetWebhookDeliveryResponse:
        delivery, attempts, body = await self._store().get_delivery(
            by, parse_id(req.delivery_id, "delivery_id")
        )
        return ad.GetWebhookDeliveryResponse(
            delivery=delivery_to_wire(delivery),
            attempts=[attempt_to_wire(a) for a in attempts],
            body=body,
        )

    async def redeliver_webhook_delivery(
        self, by: Asker, req: ad.RedeliverWebhookDeliveryRequest
    ) -> ad.RedeliverWebhookDeliveryResponse:
        delivery = await self._store().redeliver(by, parse_id(req.delivery_id, "delivery_id"))
        return ad.RedeliverWebhookDeliveryResponse(delivery=delivery_to_wire(delivery))
