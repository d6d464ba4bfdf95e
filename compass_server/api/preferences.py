"""PreferencesService, once, for every transport: a person's own
notification surfaces, quiet hours and push subscriptions."""

from __future__ import annotations

import datetime

from compass.v1 import preferences_pb2 as pb
from compass_server.api import mapping as wire
from compass_server.notify.preferences import Preferences, checked, hhmm
from compass_server.store.errors import FailedPrecondition
from compass_server.store.push import PushStore
from compass_server.store.slack import SlackStore
from compass_server.store.types import Actor

_MAIL_TO_WIRE = {
    "named": pb.MAIL_PREFERENCE_NAMED,
    "all": pb.MAIL_PREFERENCE_ALL,
    "off": pb.MAIL_PREFERENCE_OFF,
}
_MAIL_FROM_WIRE = {v: k for k, v in _MAIL_TO_WIRE.items()}


def preferences_to_wire(p: Preferences) -> pb.NotificationPreferences:
    return pb.NotificationPreferences(
        page=p.page,
        push=p.push,
        email=_MAIL_TO_WIRE[p.email],
        quiet_start=hhmm(p.quiet_start),
        quiet_end=hhmm(p.quiet_end),
        time_zone=p.time_zone,
        slack_dm=p.slack_dm,
    )


class PreferencesApi:
    """Principal "account": a person's own preferences."""

    def __init__(
        self,
        store: PushStore,
        slack: SlackStore | None = None,
        code_lifetime: datetime.timedelta = datetime.timedelta(minutes=10),
    ) -> None:
        self.store = store
        self.slack = slack
        self.code_lifetime = code_lifetime

    async def get_notification_preferences(
        self, actor: Actor, req: pb.GetNotificationPreferencesRequest
    ) -> pb.GetNotificationPreferencesResponse:
        prefs = await self.store.preferences(actor)
        try:
            _, public = await self.store.vapid_key()
        except FailedPrecondition:
            public = ""
        return pb.GetNotificationPreferencesResponse(
            preferences=preferences_to_wire(prefs),
            vapid_public_key=public,
            slack_dm_available=await self.store.slack_dm_available(actor),
            slack_app_connected=self.slack is not None and await self.slack.app_connected(actor),
        )

    async def set_notification_preferences(
        self, actor: Actor, req: pb.SetNotificationPreferencesRequest
    ) -> pb.SetNotificationPreferencesResponse:
        p = req.preferences
        # An unset mail preference keeps the default rather than turning mail off.
        email = _MAIL_FROM_WIRE.get(p.email, self.store.defaults.email)
        zone = p.time_zone or self.store.defaults.time_zone
        prefs = checked(p.page, p.push, email, p.quiet_start, p.quiet_end, zone, p.slack_dm)
        saved = await self.store.set_preferences(actor, prefs)
        return pb.SetNotificationPreferencesResponse(preferences=preferences_to_wire(saved))

    async def add_push_subscription(
        self, actor: Actor, req: pb.AddPushSubscriptionRequest
    ) -> pb.AddPushSubscriptionResponse:
        made = await self.store.add_subscription(actor, req.endpoint, req.p256dh, req.auth)
        return pb.AddPushSubscriptionResponse(
            subscription=pb.PushSubscription(
                subscription_id=str(made["id"]),
                endpoint=made["endpoint"],
                created_at=wire.timestamp(made["created_at"]),
            )
        )

    async def remove_push_subscription(
        self, actor: Actor, req: pb.RemovePushSubscriptionRequest
    ) -> pb.RemovePushSubscriptionResponse:
        removed = await self.store.remove_subscription(actor, req.endpoint)
        return pb.RemovePushSubscriptionResponse(removed=removed)

    async def create_slack_link_code(
        self, actor: Actor, req: pb.CreateSlackLinkCodeRequest
    ) -> pb.CreateSlackLinkCodeResponse:
        if self.slack is None:
            raise FailedPrecondition("this server has no Slack app support")
        code = await self.slack.person_code(actor, self.code_lifetime)
        ends = datetime.datetime.now(datetime.UTC) + self.code_lifetime
        return pb.CreateSlackLinkCodeResponse(
            code=f"{code[:4]}-{code[4:]}", expires_at=wire.timestamp(ends)
        )
