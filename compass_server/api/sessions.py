"""AdminService's operations on people: browser sessions, the email a first
sign-in links by, deactivation, and the standing answers people made. For admins over RPC and
the operator at the command line alike (AdminApi takes them in)."""

from __future__ import annotations

from compass.v1 import admin_pb2 as ad
from compass_server.api import mapping as wire
from compass_server.api.auth import Authenticator
from compass_server.store.admin import AdminStore, Asker
from compass_server.store.ids import parse_id
from compass_server.store.people import BrowserSession, People
from compass_server.store.standing import StandingAnswers


def session_to_wire(s: BrowserSession) -> ad.SessionInfo:
    out = ad.SessionInfo(
        session_id=str(s.session_id),
        account_id=str(s.account_id),
        provider=s.label,
        user_agent=s.user_agent,
        created_at=wire.timestamp(s.created_at),
        expires_at=wire.timestamp(s.expires_at),
        ends_at=wire.timestamp(s.ends_at),
        active=s.active,
    )
    if s.last_used_at is not None:
        out.last_used_at.CopyFrom(wire.timestamp(s.last_used_at))
    if s.revoked_at is not None:
        out.revoked_at.CopyFrom(wire.timestamp(s.revoked_at))
    return out


class SessionAdmin:
    admin: AdminStore
    auth: Authenticator | None
    people: People | None

    def _people(self) -> People:
        assert self.people is not None, "AdminApi was built without the people store"
        return self.people

    async def list_sessions(
        self, by: Asker, req: ad.ListSessionsRequest
    ) -> ad.ListSessionsResponse:
        found = await self._people().list_sessions(
            by, parse_id(req.account_id, "account_id"), req.include_inactive
        )
        return ad.ListSessionsResponse(sessions=[session_to_wire(s) for s in found])

    async def revoke_session(
        self, by: Asker, req: ad.RevokeSessionRequest
    ) -> ad.RevokeSessionResponse:
        session = await self._people().revoke_session(by, parse_id(req.session_id, "session_id"))
        if self.auth is not None:
            self.auth.forget(session.session_id)
        return ad.RevokeSessionResponse(session=session_to_wire(session))

    async def revoke_sessions(
        self, by: Asker, req: ad.RevokeSessionsRequest
    ) -> ad.RevokeSessionsResponse:
        n = await self._people().revoke_sessions(by, parse_id(req.account_id, "account_id"))
        return ad.RevokeSessionsResponse(sessions_revoked=n)

    async def set_account_email(
        self, by: Asker, req: ad.SetAccountEmailRequest
    ) -> ad.SetAccountEmailResponse:
        await self._people().set_email(by, parse_id(req.account_id, "account_id"), req.email)
        return ad.SetAccountEmailResponse()

    async def deactivate_account(
        self, by: Asker, req: ad.DeactivateAccountRequest
    ) -> ad.DeactivateAccountResponse:
        n = await self._people().set_deactivated(by, parse_id(req.account_id, "account_id"), True)
        return ad.DeactivateAccountResponse(credentials_revoked=n)

    async def reactivate_account(
        self, by: Asker, req: ad.ReactivateAccountRequest
    ) -> ad.ReactivateAccountResponse:
        await self._people().set_deactivated(by, parse_id(req.account_id, "account_id"), False)
        return ad.ReactivateAccountResponse()

    async def list_workspace_standing_answers(
        self, by: Asker, req: ad.ListWorkspaceStandingAnswersRequest
    ) -> ad.ListWorkspaceStandingAnswersResponse:
        store = self._people()
        assert isinstance(store, StandingAnswers), "AdminApi was built without the asks store"
        found = await store.workspace_standing_answers(
            by, wire.optional_id(req.account_id, "account_id"), req.include_ended
        )
        return ad.ListWorkspaceStandingAnswersResponse(
            standing_answers=[wire.standing_to_wire(s) for s in found]
        )
