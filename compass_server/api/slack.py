"""AdminService's Slack app methods: connect, list, disconnect, and map
channels. Mixed into AdminApi."""

from __future__ import annotations

from compass.v1 import admin_pb2 as ad
from compass_server.api import mapping as wire
from compass_server.store.admin import Asker
from compass_server.store.errors import FailedPrecondition
from compass_server.store.ids import parse_id
from compass_server.store.slack import SlackApp, SlackStore


def slack_app_to_wire(a: SlackApp) -> ad.SlackAppInfo:
    return ad.SlackAppInfo(
        app_id=str(a.app_id),
        team_id=a.team_id,
        email_match=a.email_match,
        enabled=a.enabled,
        disabled_reason=a.disabled_reason,
        created_at=wire.timestamp(a.created_at),
        pending_deliveries=a.pending,
        failed_deliveries=a.failed,
        last_error=a.last_error,
        channels=[
            ad.SlackChannelMap(channel_id=str(c), slack_channel=s) for c, s in a.channels.items()
        ],
    )


class SlackAdmin:
    """`slack` is None where no store was given."""

    slack: SlackStore | None

    def _slack(self) -> SlackStore:
        if self.slack is None:
            raise FailedPrecondition("Slack apps are not served here")
        return self.slack

    async def connect_slack_app(
        self, by: Asker, req: ad.ConnectSlackAppRequest
    ) -> ad.ConnectSlackAppResponse:
        app = await self._slack().connect(
            by, req.team_id, req.bot_token.strip(), req.signing_secret.strip(), req.email_match
        )
        return ad.ConnectSlackAppResponse(app=slack_app_to_wire(app))

    async def list_slack_apps(
        self, by: Asker, req: ad.ListSlackAppsRequest
    ) -> ad.ListSlackAppsResponse:
        apps = await self._slack().list_apps(by)
        return ad.ListSlackAppsResponse(apps=[slack_app_to_wire(a) for a in apps])

    async def disconnect_slack_app(
        self, by: Asker, req: ad.DisconnectSlackAppRequest
    ) -> ad.DisconnectSlackAppResponse:
        await self._slack().disconnect(by, parse_id(req.app_id, "app_id"))
        return ad.DisconnectSlackAppResponse()

    async def map_slack_channel(
        self, by: Asker, req: ad.MapSlackChannelRequest
    ) -> ad.MapSlackChannelResponse:
        app = await self._slack().map_channel(
            by,
            parse_id(req.app_id, "app_id"),
            parse_id(req.channel_id, "channel_id"),
            req.slack_channel,
        )
        return ad.MapSlackChannelResponse(app=slack_app_to_wire(app))

    async def unmap_slack_channel(
        self, by: Asker, req: ad.UnmapSlackChannelRequest
    ) -> ad.UnmapSlackChannelResponse:
        app = await self._slack().unmap_channel(
            by, parse_id(req.app_id, "app_id"), parse_id(req.channel_id, "channel_id")
        )
        return ad.UnmapSlackChannelResponse(app=slack_app_to_wire(app))
