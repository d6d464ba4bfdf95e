"""`compass-server admin` commands for people's sign-in: browser sessions,
the email a first sign-in links by, deactivation, and one-ask links."""

from __future__ import annotations

import argparse
from typing import Any

from compass.v1 import admin_pb2 as ad
from compass_server.cli.admin import Action, Handler, operator_of
from compass_server.cli.arguments import an_id, duration
from compass_server.cli.output import plain
from compass_server.store import Store
from compass_server.store.errors import InvalidArgument
from compass_server.store.people import SIGNIN_ADDRESS_LIFETIME
from compass_server.store.webhooks import WebhookStore

ACTIONS = {
    "list-sessions": "lists a person's browser sessions, newest first",
    "revoke-session": "ends one browser session, on every server",
    "revoke-sessions": "ends every browser session of a person",
    "set-email": "the email a person's first sign-in links their account by",
    "deactivate-account": "ends an account's tokens, sessions and links; it signs in no more",
    "reactivate-account": "lets a deactivated account sign in again",
    "sign-in-address": "a one-time address that signs a browser in as a person; prints it",
    "create-ask-link": "a link that opens one ask for one person; prints its URL",
    "revoke-ask-link": "a one-ask link opens nothing from now on",
    "set-mail-preference": "which asks a person is mailed about: named (default), all or off",
}


def add_parsers(action: Action) -> None:
    def account(p: argparse.ArgumentParser) -> None:
        p.add_argument("--account", required=True, type=an_id, metavar="ID", help="the person")

    listed = action("list-sessions")
    account(listed)
    listed.add_argument("--all", action="store_true", help="also ended sessions")
    one = action("revoke-session")
    one.add_argument("session_id", type=an_id, metavar="SESSION_ID", help="the session's id")
    every = action("revoke-sessions")
    account(every)
    email = action("set-email")
    account(email)
    email.add_argument("--email", required=True, metavar="EMAIL", help='the email ("" clears it)')
    off = action("deactivate-account")
    off.add_argument("account_id", type=an_id, metavar="ACCOUNT_ID", help="the account's id")
    on = action("reactivate-account")
    on.add_argument("account_id", type=an_id, metavar="ACCOUNT_ID", help="the account's id")
    address = action("sign-in-address")
    account(address)
    address.add_argument(
        "--expires-in",
        type=duration,
        metavar="DURATION",
        help="how long it opens (default 15m; at most signin.link_max)",
    )
    address.add_argument(
        "--next",
        default="/",
        metavar="PATH",
        help="where the browser goes once signed in, a path of the page's, like /#/ask/ASK_ID "
        "(default /)",
    )
    link = action("create-ask-link")
    link.add_argument("--ask", required=True, metavar="ASK_ID", help="the ask it opens")
    account(link)
    link.add_argument(
        "--expires-in",
        type=duration,
        metavar="DURATION",
        help="its lifetime, e.g. 3600, 90m, 12h or 30d (default and most: signin.link_max)",
    )
    unlink = action("revoke-ask-link")
    unlink.add_argument("link_id", type=an_id, metavar="LINK_ID", help="the link's id")
    mail = action("set-mail-preference")
    account(mail)
    mail.add_argument(
        "--mail",
        required=True,
        choices=["named", "all", "off"],
        help="named: asks that name them; all: also their channels' asks that name nobody",
    )


async def _list_sessions(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.list_sessions(
        await operator_of(store, args.account),
        ad.ListSessionsRequest(account_id=str(args.account), include_inactive=args.all),
    )
    return {"sessions": [plain(s) for s in r.sessions]}


async def _revoke_session(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.revoke_session(
        await operator_of(store, args.session_id),
        ad.RevokeSessionRequest(session_id=str(args.session_id)),
    )
    return plain(r.session)


async def _revoke_sessions(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.revoke_sessions(
        await operator_of(store, args.account),
        ad.RevokeSessionsRequest(account_id=str(args.account)),
    )
    return plain(r)


async def _set_email(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    await args.admin_api.set_account_email(
        await operator_of(store, args.account),
        ad.SetAccountEmailRequest(account_id=str(args.account), email=args.email),
    )
    return {"account_id": str(args.account), "email": args.email}


async def _deactivate(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.deactivate_account(
        await operator_of(store, args.account_id),
        ad.DeactivateAccountRequest(account_id=str(args.account_id)),
    )
    return {"account_id": str(args.account_id), **plain(r)}


async def _reactivate(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    await args.admin_api.reactivate_account(
        await operator_of(store, args.account_id),
        ad.ReactivateAccountRequest(account_id=str(args.account_id)),
    )
    return {"account_id": str(args.account_id), "deactivated": False}


async def _create_link(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    by = await operator_of(store, args.account)
    store.link_lifetime = args.link_max
    minted = await store.mint_ask_link(by.workspace_id, args.ask, args.account, args.expires_in)
    return {
        "link_id": str(minted.link.link_id),
        "ask_id": minted.link.ask_id,
        "account_id": str(minted.link.account_id),
        "expires_at": minted.link.expires_at.isoformat(),
        "url": f"{args.public_url.rstrip('/')}/a/{minted.secret}",
    }


async def _sign_in_address(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    by = await operator_of(store, args.account)
    lifetime = args.expires_in or SIGNIN_ADDRESS_LIFETIME
    if lifetime > args.link_max:
        raise InvalidArgument(f"--expires-in is at most signin.link_max ({args.link_max})")
    made = await store.mint_signin_address(
        by.workspace_id, args.account, lifetime=lifetime, next=args.next
    )
    return {
        "account_id": str(made.account_id),
        "expires_at": made.expires_at.isoformat(),
        "url": f"{args.public_url.rstrip('/')}/auth/address/{made.secret}",
    }


async def _revoke_link(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    link = await store.revoke_ask_link(await operator_of(store, args.link_id), args.link_id)
    return {
        "link_id": str(link.link_id),
        "revoked_at": link.revoked_at.isoformat() if link.revoked_at else None,
    }


async def _set_mail(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    mail = WebhookStore(store.db, store.admin, None)
    await mail.set_email_preference(await operator_of(store, args.account), args.account, args.mail)
    return {"account_id": str(args.account), "mail": args.mail}


HANDLERS: dict[str, Handler] = {
    "list-sessions": _list_sessions,
    "revoke-session": _revoke_session,
    "revoke-sessions": _revoke_sessions,
    "set-email": _set_email,
    "deactivate-account": _deactivate,
    "reactivate-account": _reactivate,
    "sign-in-address": _sign_in_address,
    "create-ask-link": _create_link,
    "revoke-ask-link": _revoke_link,
    "set-mail-preference": _set_mail,
}
