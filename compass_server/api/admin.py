"""AdminService and IdentityService, once, for every transport; the operator's
command line calls the same AdminApi with an Operator in place of an account."""

from __future__ import annotations

import datetime

from google.protobuf import duration_pb2

from compass.v1 import admin_pb2 as ad
from compass_server.api import mapping as wire
from compass_server.api.auth import Authenticator
from compass_server.api.sessions import SessionAdmin
from compass_server.api.slack import SlackAdmin
from compass_server.api.webhooks import WebhookAdmin
from compass_server.hooks import policy as hook_policy
from compass_server.store.admin import AdminStore, Asker
from compass_server.store.errors import InvalidArgument, Unavailable
from compass_server.store.follow_up_defaults import FollowUpDefaults
from compass_server.store.hooks import HookStore
from compass_server.store.ids import parse_id
from compass_server.store.people import People
from compass_server.store.slack import SlackStore
from compass_server.store.types import (
    Account,
    AccountKind,
    IssuedToken,
    Role,
    Runner,
    SignIn,
    Token,
)
from compass_server.store.webhooks import WebhookStore
from compass_server.webhooks.destination import Reach

_KIND_TO_WIRE = {
    AccountKind.HUMAN: ad.PRINCIPAL_KIND_HUMAN,
    AccountKind.AGENT: ad.PRINCIPAL_KIND_AGENT,
}
_KIND_FROM_WIRE = {v: k for k, v in _KIND_TO_WIRE.items()}
_ROLE_TO_WIRE = {Role.MEMBER: ad.WORKSPACE_ROLE_MEMBER, Role.ADMIN: ad.WORKSPACE_ROLE_ADMIN}
_ROLE_FROM_WIRE = {v: k for k, v in _ROLE_TO_WIRE.items()}


# --- wire ⇄ store ------------------------------------------------------------------


def account_to_wire(a: Account) -> ad.AccountInfo:
    out = ad.AccountInfo(
        account_id=str(a.account_id),
        handle=a.handle,
        kind=_KIND_TO_WIRE[a.kind],
        role=_ROLE_TO_WIRE[a.role],
        owner_account_id=str(a.owner_id) if a.owner_id else "",
        parent_account_id=str(a.parent_id) if a.parent_id else "",
    )
    if a.created_at is not None:
        out.created_at.CopyFrom(wire.timestamp(a.created_at))
    return out


def runner_to_wire(r: Runner) -> ad.RunnerInfo:
    out = ad.RunnerInfo(
        runner_id=str(r.runner_id), name=r.name, agent_account_ids=[str(a) for a in r.agent_ids]
    )
    if r.created_at is not None:
        out.created_at.CopyFrom(wire.timestamp(r.created_at))
    return out


def token_to_wire(t: Token) -> ad.TokenInfo:
    out = ad.TokenInfo(
        token_id=str(t.token_id),
        kind=_KIND_TO_WIRE[t.account_kind] if t.account_kind else ad.PRINCIPAL_KIND_RUNNER,
        account_id=str(t.account_id) if t.account_id else "",
        runner_id=str(t.runner_id) if t.runner_id else "",
        label=t.label,
        created_at=wire.timestamp(t.created_at),
        replaced_by_token_id=str(t.replaced_by) if t.replaced_by else "",
        active=t.active,
    )
    for name, value in (
        ("expires_at", t.expires_at),
        ("last_used_at", t.last_used_at),
        ("revoked_at", t.revoked_at),
    ):
        if value is not None:
            getattr(out, name).CopyFrom(wire.timestamp(value))
    return out


def _duration(value: duration_pb2.Duration, present: bool) -> datetime.timedelta | None:
    if not present:
        return None
    if not -(10**12) < value.seconds < 10**12:
        raise InvalidArgument("a duration is out of range")
    return value.ToTimedelta()


def _role(value: int) -> Role:
    role = _ROLE_FROM_WIRE.get(value)  # type: ignore[call-overload]
    if role is None:
        raise InvalidArgument("role must be WORKSPACE_ROLE_MEMBER or WORKSPACE_ROLE_ADMIN")
    return role  # type: ignore[no-any-return]


def _issued(issued: IssuedToken) -> tuple[str, ad.TokenInfo]:
    return issued.secret, token_to_wire(issued.token)


class AdminApi(WebhookAdmin, SessionAdmin, SlackAdmin):
    """Principal "account": every method takes an admin (the store checks) or,
    from the command line, the operator."""

    def __init__(
        self,
        admin: AdminStore,
        auth: Authenticator | None = None,
        *,
        webhooks: WebhookStore | None = None,
        reach: Reach | None = None,
        people: People | None = None,
        slack: SlackStore | None = None,
        defaults: FollowUpDefaults | None = None,
    ) -> None:
        self.admin = admin
        self.defaults = defaults
        self.slack = slack
        self.people = people
        # This process drops a revoked token at once, before the notification.
        self.auth = auth
        self.webhooks = webhooks
        self.reach = reach or Reach()

    def _forget(self, token: Token) -> None:
        if self.auth is not None:
            self.auth.forget(token.token_id)

    async def list_accounts(
        self, by: Asker, req: ad.ListAccountsRequest
    ) -> ad.ListAccountsResponse:
        page = await self.admin.list_accounts(by, req.page_size, req.page_token)
        return ad.ListAccountsResponse(
            accounts=[account_to_wire(a) for a in page.items], next_page_token=page.next_page_token
        )

    async def create_account(
        self, by: Asker, req: ad.CreateAccountRequest
    ) -> ad.CreateAccountResponse:
        kind = _KIND_FROM_WIRE.get(req.kind)
        if kind is None:
            raise InvalidArgument("kind must be PRINCIPAL_KIND_HUMAN or PRINCIPAL_KIND_AGENT")
        account, issued = await self.admin.create_account(
            by,
            req.handle,
            kind,
            wire.optional_id(req.owner_account_id, "owner_account_id"),
            Role.MEMBER if req.role == ad.WORKSPACE_ROLE_UNSPECIFIED else _role(req.role),
            req.token_label,
            _duration(req.token_expires_in, req.HasField("token_expires_in")),
            wire.optional_id(req.parent_account_id, "parent_account_id"),
        )
        secret, info = _issued(issued)
        return ad.CreateAccountResponse(
            account=account_to_wire(account), token=secret, token_info=info
        )

    def _defaults(self) -> FollowUpDefaults:
        if self.defaults is None:
            raise Unavailable("follow-up defaults aren't served here")
        return self.defaults

    async def set_workspace_follow_up_default(
        self, by: Asker, req: ad.SetWorkspaceFollowUpDefaultRequest
    ) -> ad.SetWorkspaceFollowUpDefaultResponse:
        stored = await self._defaults().set_workspace_follow_up_default(
            by, wire.follow_up_from_wire(req.follow_up) if req.HasField("follow_up") else None
        )
        out = ad.SetWorkspaceFollowUpDefaultResponse()
        if stored is not None:
            # Present even when empty: "no follow-ups" differs from unset.
            out.follow_up.SetInParent()
            out.follow_up.CopyFrom(wire.follow_up_to_wire(stored))
        return out

    async def get_workspace_follow_up_default(
        self, by: Asker, req: ad.GetWorkspaceFollowUpDefaultRequest
    ) -> ad.GetWorkspaceFollowUpDefaultResponse:
        stored = await self._defaults().workspace_follow_up_default(by)
        out = ad.GetWorkspaceFollowUpDefaultResponse()
        if stored is not None:
            # Present even when empty: "no follow-ups" differs from unset.
            out.follow_up.SetInParent()
            out.follow_up.CopyFrom(wire.follow_up_to_wire(stored))
        return out

    async def set_account_role(
        self, by: Asker, req: ad.SetAccountRoleRequest
    ) -> ad.SetAccountRoleResponse:
        account = await self.admin.set_role(
            by, parse_id(req.account_id, "account_id"), _role(req.role)
        )
        return ad.SetAccountRoleResponse(account=account_to_wire(account))

    async def list_runners(self, by: Asker, req: ad.ListRunnersRequest) -> ad.ListRunnersResponse:
        page = await self.admin.list_runners(by, req.page_size, req.page_token)
        return ad.ListRunnersResponse(
            runners=[runner_to_wire(r) for r in page.items], next_page_token=page.next_page_token
        )

    async def create_runner(
        self, by: Asker, req: ad.CreateRunnerRequest
    ) -> ad.CreateRunnerResponse:
        runner, issued = await self.admin.create_runner(
            by,
            req.name,
            req.token_label,
            _duration(req.token_expires_in, req.HasField("token_expires_in")),
        )
        secret, info = _issued(issued)
        return ad.CreateRunnerResponse(runner=runner_to_wire(runner), token=secret, token_info=info)

    async def assign_agent(self, by: Asker, req: ad.AssignAgentRequest) -> ad.AssignAgentResponse:
        runner = await self.admin.assign_agent(
            by,
            parse_id(req.runner_id, "runner_id"),
            parse_id(req.agent_account_id, "agent_account_id"),
        )
        return ad.AssignAgentResponse(runner=runner_to_wire(runner))

    async def unassign_agent(
        self, by: Asker, req: ad.UnassignAgentRequest
    ) -> ad.UnassignAgentResponse:
        runner, unbound = await self.admin.unassign_agent(
            by,
            parse_id(req.runner_id, "runner_id"),
            parse_id(req.agent_account_id, "agent_account_id"),
        )
        return ad.UnassignAgentResponse(runner=runner_to_wire(runner), sessions_unbound=unbound)

    async def reparent_agent(
        self, by: Asker, req: ad.ReparentAgentRequest
    ) -> ad.ReparentAgentResponse:
        account = await self.admin.reparent_agent(
            by,
            parse_id(req.agent_account_id, "agent_account_id"),
            wire.optional_id(req.parent_account_id, "parent_account_id"),
        )
        return ad.ReparentAgentResponse(account=account_to_wire(account))

    async def list_tokens(self, by: Asker, req: ad.ListTokensRequest) -> ad.ListTokensResponse:
        page = await self.admin.list_tokens(
            by,
            wire.optional_id(req.account_id, "account_id"),
            wire.optional_id(req.runner_id, "runner_id"),
            req.include_inactive,
            req.page_size,
            req.page_token,
        )
        return ad.ListTokensResponse(
            tokens=[token_to_wire(t) for t in page.items], next_page_token=page.next_page_token
        )

    async def create_token(self, by: Asker, req: ad.CreateTokenRequest) -> ad.CreateTokenResponse:
        issued = await self.admin.create_token(
            by,
            wire.optional_id(req.account_id, "account_id"),
            wire.optional_id(req.runner_id, "runner_id"),
            req.label,
            _duration(req.expires_in, req.HasField("expires_in")),
        )
        secret, info = _issued(issued)
        return ad.CreateTokenResponse(token=secret, token_info=info)

    async def create_hook_token(
        self, by: Asker, req: ad.CreateHookTokenRequest
    ) -> ad.CreateHookTokenResponse:
        issued, policy = await HookStore(self.admin.db, self.admin).create_hook_token(
            by,
            parse_id(req.agent_account_id, "agent_account_id"),
            parse_id(req.channel_id, "channel_id"),
            hook_policy.parse(req.policy),
            req.label,
            _duration(req.expires_in, req.HasField("expires_in")),
        )
        secret, info = _issued(issued)
        return ad.CreateHookTokenResponse(
            token=secret, token_info=info, rules=[r.name for r in policy.rules]
        )

    async def revoke_token(self, by: Asker, req: ad.RevokeTokenRequest) -> ad.RevokeTokenResponse:
        token = await self.admin.revoke_token(by, parse_id(req.token_id, "token_id"))
        self._forget(token)
        return ad.RevokeTokenResponse(token_info=token_to_wire(token))

    async def rotate_token(self, by: Asker, req: ad.RotateTokenRequest) -> ad.RotateTokenResponse:
        issued, old = await self.admin.rotate_token(
            by,
            parse_id(req.token_id, "token_id"),
            _duration(req.grace, req.HasField("grace")),
            _duration(req.expires_in, req.HasField("expires_in")),
        )
        self._forget(old)
        secret, info = _issued(issued)
        return ad.RotateTokenResponse(
            token=secret, token_info=info, old_token_info=token_to_wire(old)
        )


class IdentityApi:
    """Principal "any": takes the whole sign-in, account or runner."""

    def __init__(self, admin: AdminStore) -> None:
        self.admin = admin

    async def who_am_i(self, sign_in: SignIn, req: ad.WhoAmIRequest) -> ad.WhoAmIResponse:
        identity = await self.admin.who_am_i(sign_in)
        out = ad.WhoAmIResponse(
            workspace_id=str(identity.workspace.workspace_id),
            workspace_name=identity.workspace.name,
            token_info=token_to_wire(identity.token),
        )
        if isinstance(identity.principal, Account):
            out.account.CopyFrom(account_to_wire(identity.principal))
        else:
            out.runner.CopyFrom(runner_to_wire(identity.principal))
        return out
