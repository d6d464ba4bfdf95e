"""People as they sign in: identities from an OpenID provider, browser
sessions, the key sign-ins under way are signed with, and deactivation.
Mixed into Store.

An identity is (issuer, subject) in a workspace, linked to one account; an
email alone never signs anyone in. A browser session is a credential of kind
`session` (its secret's digest stored, the secret in an HttpOnly cookie): it
ends after `idle` without use, and at its absolute end. Revoking one, or
deactivating an account, notifies every server through `compass_access` as
a revoked token does, and waits for every live server to apply it.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import secrets
import uuid
from typing import Any

import psycopg

from compass_server.store.admin import MAX_HANDLE_CHARS, AdminStore, Asker, hash_token, new_token
from compass_server.store.db import Conn, Database, queries
from compass_server.store.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
)
from compass_server.store.types import AccountKind, Actor, Operator, Role

PEOPLE = queries("people")

# Tried in turn when a handle is taken: ada, ada-2, … ada-100.
MAX_HANDLE_TRIES = 100
MAX_EMAIL_CHARS = 254
MAX_USER_AGENT_CHARS = 200
# A session listing reads at most this many.
MAX_SESSIONS_LISTED = 200
# How long a sign-in address opens by default (at most signin.link_max).
SIGNIN_ADDRESS_LIFETIME = datetime.timedelta(minutes=15)
# Where a sign-in address may send the browser: a path of the page's own.
_NEXT = re.compile(r"/(?!/)[^\s\\]{0,500}")


@dataclasses.dataclass(frozen=True, slots=True)
class Person:
    """Who an identity signs in as."""

    account_id: uuid.UUID
    handle: str
    # How the account was found: "identity", "email" (linked now) or "created".
    how: str


@dataclasses.dataclass(frozen=True, slots=True)
class BrowserSession:
    session_id: uuid.UUID
    account_id: uuid.UUID
    # The provider it signed in through.
    label: str
    user_agent: str
    created_at: datetime.datetime
    last_used_at: datetime.datetime | None
    # When it ends unless used again, and when it ends at the latest.
    expires_at: datetime.datetime
    ends_at: datetime.datetime
    revoked_at: datetime.datetime | None
    active: bool


@dataclasses.dataclass(frozen=True, slots=True)
class StartedSession:
    person: Person
    # The cookie's value: shown once, stored as its digest.
    secret: str
    session: BrowserSession


@dataclasses.dataclass(frozen=True, slots=True)
class SigninAddress:
    address_id: uuid.UUID
    account_id: uuid.UUID
    # The address's secret: shown once, stored as its digest.
    secret: str
    expires_at: datetime.datetime


@dataclasses.dataclass(frozen=True, slots=True)
class AddressUsed:
    # signed_in, or why not: unknown, used, expired, deactivated.
    status: str
    handle: str
    # With signed_in: the session's cookie value, and where to go.
    secret: str = ""
    next: str = "/"
    session: BrowserSession | None = None


class Refused(Exception):
    """A sign-in the rules turn away; the message is for the person."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def handle_from(value: str) -> str:
    """A handle made of a claim's value: an email's local part, the letters,
    digits, dots, dashes and underscores; "person" when nothing is left."""
    local = value.split("@", 1)[0].strip().lower()
    cleaned = re.sub(r"[^a-z0-9._-]+", "-", local).strip("-._")
    return (cleaned or "person")[: MAX_HANDLE_CHARS - 4]


def _session(row: dict[str, Any]) -> BrowserSession:
    return BrowserSession(
        session_id=row["id"],
        account_id=row["account_id"],
        label=row["label"],
        user_agent=row["user_agent"],
        created_at=row["created_at"],
        last_used_at=row["last_used_at"],
        expires_at=row["expires_at"],
        ends_at=row["ends_at"],
        revoked_at=row["revoked_at"],
        active=row["active"],
    )


class People:
    """Identities, browser sessions and deactivation. Mixed into Store."""

    db: Database
    admin: AdminStore

    # --- sign-ins under way (before anyone is known) ------------------------------------

    async def signin_key(self) -> bytes:
        """The key sign-ins under way are signed with: made by the first
        server that asks, the same for every server after."""
        async with self.db.maintenance() as conn:
            row = await (await conn.execute(PEOPLE["signin_key"])).fetchone()
            if row is None:
                await conn.execute(PEOPLE["make_signin_key"], {"key": secrets.token_bytes(32)})
                row = await (await conn.execute(PEOPLE["signin_key"])).fetchone()
        assert row is not None
        return bytes(row["key"])

    # --- sign-in addresses ------------------------------------------------------------

    async def mint_signin_address(
        self,
        workspace_id: uuid.UUID,
        account_id: uuid.UUID,
        *,
        lifetime: datetime.timedelta,
        next: str = "/",
    ) -> SigninAddress:
        """A one-time address that signs a browser in as this person: the
        operator's, for a person who signs in without an identity provider."""
        if not _NEXT.fullmatch(next):
            raise InvalidArgument(
                f"--next must be a path of the page's own, like /#/ask/ASK_ID, not {next!r}"
            )
        if lifetime <= datetime.timedelta(0):
            raise InvalidArgument("an address lives more than 0 s")
        secret = new_token("csa")
        address_id = uuid.uuid4()
        async with self.db.tx(Operator(workspace_id)) as conn:
            row = await self._one(conn, "person_to_sign_in", id=account_id)
            if row is None or row["kind"] != AccountKind.HUMAN.value:
                raise NotFound(f"no person {account_id} in this workspace (agents never sign in)")
            if row["deactivated_at"] is not None:
                raise FailedPrecondition(f"account {account_id} is deactivated")
            made = await self._one(
                conn,
                "insert_signin_address",
                id=address_id,
                account_id=account_id,
                token_hash=hash_token(secret),
                next=next,
                lifetime=lifetime,
            )
        assert made is not None
        return SigninAddress(address_id, account_id, secret, made["expires_at"])

    async def signin_address_holder(self, secret: str) -> tuple[str, str]:
        """(open, used, expired, deactivated or unknown; whose) without using it."""
        async with self.db.maintenance() as conn:
            cur = await conn.execute(
                PEOPLE["signin_address_holder"], {"digest": hash_token(secret)}
            )
            row = await cur.fetchone()
        return ("unknown", "") if row is None else (row["status"], row["handle"])

    async def use_signin_address(
        self,
        secret: str,
        *,
        idle: datetime.timedelta,
        lifetime: datetime.timedelta,
        user_agent: str,
    ) -> AddressUsed:
        """Signs a browser in with the address, once: a new session, or why not."""
        session_secret = new_token("cps")
        session_id = uuid.uuid4()
        async with self.db.maintenance() as conn, conn.transaction():
            cur = await conn.execute(
                PEOPLE["use_signin_address"],
                {
                    "digest": hash_token(secret),
                    "session_digest": hash_token(session_secret),
                    "session_id": session_id,
                    "idle": idle,
                    "lifetime": lifetime,
                    "agent": user_agent[:MAX_USER_AGENT_CHARS],
                },
            )
            row = await cur.fetchone()
        if row is None or row["status"] != "signed_in":
            status = "unknown" if row is None else row["status"]
            return AddressUsed(status, (row or {}).get("handle") or "")
        now = datetime.datetime.now(datetime.UTC)
        session = BrowserSession(
            session_id=session_id,
            account_id=row["account_id"],
            label="sign-in address",
            user_agent=user_agent[:MAX_USER_AGENT_CHARS],
            created_at=now,
            last_used_at=None,
            expires_at=now + min(idle, lifetime),
            ends_at=now + lifetime,
            revoked_at=None,
            active=True,
        )
        return AddressUsed("signed_in", row["handle"], session_secret, row["next"], session)

    # --- identities and sessions -----------------------------------------------------

    async def sign_in_person(
        self,
        workspace_id: uuid.UUID,
        *,
        issuer: str,
        subject: str,
        email: str | None,
        may_create: bool,
        handle: str,
        provider: str,
        user_agent: str,
        idle: datetime.timedelta,
        lifetime: datetime.timedelta,
    ) -> StartedSession:
        """The account (issuer, subject) signs in as, and a new session for it,
        in one transaction: the linked account; else, with a verified `email`,
        the person created with that email (linked now); else, when
        `may_create`, a new member (its handle `handle`, made unique). Refused
        otherwise, and for a deactivated account; nothing is written then."""
        person: Person | None = None
        async with self.db.tx(Operator(workspace_id)) as conn:
            row = await self._one(conn, "identity_account", issuer=issuer, subject=subject)
            if row is not None:
                _usable(row)
                await conn.execute(
                    PEOPLE["seen_identity"],
                    {"issuer": issuer, "subject": subject, "email": email or ""},
                )
                person = Person(row["id"], row["handle"], "identity")
            elif email:
                row = await self._one(conn, "account_by_email", email=email, issuer=issuer)
                if row is not None:
                    _usable(row)
                    person = Person(row["id"], row["handle"], "email")
                elif may_create:
                    person = await self._create_person(conn, handle, email)
                if person is not None:
                    await conn.execute(
                        PEOPLE["insert_identity"],
                        {
                            "issuer": issuer,
                            "subject": subject,
                            "account_id": person.account_id,
                            "email": email,
                        },
                    )
            if person is None:
                raise Refused(
                    "this workspace has no account for you: ask an admin to add your email"
                    if email
                    else "this workspace has no account for you, and your provider didn't "
                    "confirm an email to link you by: ask an admin"
                )
            secret = new_token("cps")
            session_id = uuid.uuid4()
            await conn.execute(
                PEOPLE["insert_session"],
                {
                    "token_hash": hash_token(secret),
                    "id": session_id,
                    "account_id": person.account_id,
                    "label": provider,
                    "idle": idle,
                    "lifetime": lifetime,
                    "user_agent": user_agent[:MAX_USER_AGENT_CHARS],
                },
            )
            session = await self._get_session(conn, session_id)
        return StartedSession(person, secret, session)

    async def _one(self, conn: Conn, query: str, **params: object) -> dict[str, Any] | None:
        row: dict[str, Any] | None = await (await conn.execute(PEOPLE[query], params)).fetchone()
        return row

    async def _create_person(self, conn: Conn, handle: str, email: str) -> Person:
        for n in range(1, MAX_HANDLE_TRIES + 1):
            candidate = handle if n == 1 else f"{handle}-{n}"
            try:
                async with conn.transaction():
                    cur = await conn.execute(
                        PEOPLE["insert_person"],
                        {"id": uuid.uuid4(), "handle": candidate, "email": email},
                    )
                    row = await cur.fetchone()
            except psycopg.errors.UniqueViolation as exc:
                if exc.diag.constraint_name == "accounts_email":
                    raise Refused("another account has this email; ask an admin") from None
                continue
            assert row is not None
            return Person(row["id"], row["handle"], "created")
        raise Refused(f"no free handle like {handle!r}; ask an admin to create your account")

    async def set_email(self, by: Asker, account_id: uuid.UUID, email: str) -> None:
        """The email a person's first sign-in links by ("" clears it)."""
        if len(email) > MAX_EMAIL_CHARS or (email and "@" not in email):
            raise InvalidArgument(f"an email has an @ and at most {MAX_EMAIL_CHARS} characters")
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            try:
                row = await self._one(conn, "set_email", id=account_id, email=email or None)
            except psycopg.errors.UniqueViolation:
                raise FailedPrecondition(
                    "another account of the workspace has this email"
                ) from None
            if row is None:
                raise NotFound(f"no person {account_id}")

    async def _get_session(self, conn: Conn, session_id: uuid.UUID) -> BrowserSession:
        row = await self._one(conn, "get_session", id=session_id)
        if row is None:
            raise NotFound(f"no session {session_id}")
        return _session(row)

    async def list_sessions(
        self, by: Asker, account_id: uuid.UUID, include_inactive: bool = False
    ) -> list[BrowserSession]:
        """A person's browser sessions, newest first (at most 200)."""
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            await self.admin._get_account(conn, account_id)
            cur = await conn.execute(
                PEOPLE["list_sessions"],
                {
                    "account_id": account_id,
                    "include_inactive": include_inactive,
                    "limit": MAX_SESSIONS_LISTED,
                },
            )
            return [_session(r) for r in await cur.fetchall()]

    async def revoke_session(self, by: Asker, session_id: uuid.UUID) -> BrowserSession:
        """Ends one session on every server; a revoked one stays as it is."""
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            await self._get_session(conn, session_id)
            seq = await self._revoke(conn, "revoke_credential", id=session_id, kind="session")
            session = await self._get_session(conn, session_id)
        await self._confirmed(seq)
        return session

    async def revoke_sessions(self, by: Asker, account_id: uuid.UUID) -> int:
        """Ends every session of the person; returns how many were live."""
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            await self.admin._get_account(conn, account_id)
            ids = await self._revoked_ids(conn, "revoke_sessions_of", account_id=account_id)
            seq = await self._notify(conn, ids)
        await self._confirmed(seq)
        return len(ids)

    async def sign_out(self, actor: Actor, session_id: uuid.UUID) -> None:
        """The person ends their own session (their cookie's), everywhere."""
        async with self.db.tx(actor) as conn:
            seq = await self._revoke(conn, "revoke_credential", id=session_id, kind="session")
        await self._confirmed(seq)

    async def set_deactivated(self, by: Asker, account_id: uuid.UUID, deactivated: bool) -> int:
        """Deactivates an account (ending every token, session and link it has,
        on every server) or lets it sign in again (with new credentials).
        Returns how many credentials were ended. The last active admin stays."""
        if isinstance(by, Actor) and by.account_id == account_id and deactivated:
            raise FailedPrecondition("you can't deactivate your own account")
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            row = await self._one(conn, "lock_account", id=account_id)
            if row is None:
                raise NotFound(f"no account {account_id}")
            if deactivated and row["role"] == Role.ADMIN and row["kind"] == AccountKind.HUMAN:
                await self.admin._lock_workspace(conn, by.workspace_id)
                others = await self._one(conn, "other_active_admins", id=account_id)
                if others is not None and others["n"] == 0:
                    raise FailedPrecondition(
                        "this is the workspace's last admin; make another admin first"
                    )
            await conn.execute(
                PEOPLE["set_deactivated"], {"id": account_id, "deactivated": deactivated}
            )
            ids = (
                await self._revoked_ids(conn, "revoke_everything_of", account_id=account_id)
                if deactivated
                else []
            )
            seq = await self._notify(conn, ids)
        await self._confirmed(seq)
        return len(ids)

    # --- revocation, through the one mechanism tokens use --------------------------------

    async def _revoked_ids(self, conn: Conn, query: str, **params: object) -> list[uuid.UUID]:
        cur = await conn.execute(PEOPLE[query], params)
        return [r["id"] for r in await cur.fetchall()]

    async def _revoke(self, conn: Conn, query: str, **params: object) -> int | None:
        return await self._notify(conn, await self._revoked_ids(conn, query, **params))

    async def _notify(self, conn: Conn, ids: list[uuid.UUID]) -> int | None:
        seq = None
        for credential_id in ids:
            seq = await self.admin._notify_revoked(conn, credential_id)
        return seq

    async def _confirmed(self, seq: int | None) -> None:
        if seq is not None:
            await self.admin._wait_applied(seq)


def _usable(row: dict[str, Any]) -> None:
    if row["kind"] != AccountKind.HUMAN:
        raise Refused("that account is an agent's; people sign in to their own")
    if row["deactivated"]:
        raise Refused("your account is deactivated; ask an admin of the workspace")
