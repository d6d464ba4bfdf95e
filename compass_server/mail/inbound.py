"""What the server does with a reply to a mail about an ask, however it came
in (its SMTP listener or the inbound webhook): finds whom and what its
address answers, checks the mail is that person's, reads the choice on its
first line, answers or declines as that person through the ask's own rules,
and mails back a short confirmation, or why nothing was recorded.
"""

from __future__ import annotations

import dataclasses
import email.message
import email.utils
import enum
import logging
import re
import uuid

from compass_server.api.text import check_text
from compass_server.mail.reading import (
    Choice,
    address_of,
    first_line,
    read_choice,
    reply_token,
    text_of_html,
)
from compass_server.notify.mailer import Outgoing, Relay
from compass_server.store.errors import (
    Conflict,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    StoreError,
)
from compass_server.store.replies import ReplyHolder
from compass_server.store.slack import SlackStore
from compass_server.store.store import Store
from compass_server.store.types import Actor, Answer, Ask, Surface

log = logging.getLogger(__name__)

# What a relay reports as a check that passed; anything else reported fails.
_PASSED = "pass"
_RESULT = re.compile(r"\b(spf|dkim)\s*=\s*([a-z]+)", re.I)


class Outcome(enum.StrEnum):
    """What became of a reply (what the webhook answers, what the log says)."""

    ANSWERED = "answered"
    DECLINED = "declined"
    # The ask had ended (or is no longer the person's): nothing recorded.
    ENDED = "ended"
    UNREADABLE = "unreadable"
    # The ask needs more than a first line can say: the link is sent.
    NEEDS_PAGE = "needs_page"
    # Sent by someone who isn't the person the address answers as.
    NOT_YOURS = "not_yours"
    # The relay's SPF and DKIM checks both failed: nothing is answered or sent.
    UNVERIFIED = "unverified"
    # An automatic mail (a bounce, an out-of-office): never answered.
    AUTOMATIC = "automatic"
    # Not a reply address of this server.
    UNKNOWN_ADDRESS = "unknown_address"


@dataclasses.dataclass(frozen=True, slots=True)
class Inbound:
    """One mail, as the listener or the webhook read it."""

    # The From header's address.
    sender: str
    # The envelope's sender (MAIL FROM) when known; "" is the null sender of a bounce.
    envelope_from: str | None
    recipients: tuple[str, ...]
    subject: str
    message_id: str
    text: str
    # Auto-Submitted other than "no", or Precedence bulk/junk/list.
    automatic: bool = False
    # The relay's results, when it reports them ("pass", "fail", …).
    spf: str | None = None
    dkim: str | None = None


def results_of(header_values: list[str]) -> tuple[str | None, str | None]:
    """SPF and DKIM as the nearest Authentication-Results header says (the
    one the receiving relay added on top)."""
    if not header_values:
        return None, None
    found = {k.lower(): v.lower() for k, v in reversed(_RESULT.findall(header_values[0]))}
    return found.get("spf"), found.get("dkim")


def automatic(message: email.message.Message) -> bool:
    auto = (message.get("Auto-Submitted") or "no").strip().lower()
    precedence = (message.get("Precedence") or "").strip().lower()
    return auto != "no" or precedence in ("bulk", "junk", "list")


def body_text(message: email.message.EmailMessage) -> str:
    """A mail's text: its plain part, else its HTML's text."""
    part = message.get_body(("plain", "html"))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, ValueError, AssertionError):
        return ""
    if not isinstance(content, str):
        return ""
    return content if part.get_content_subtype() == "plain" else text_of_html(content)


def inbound_of(
    message: email.message.EmailMessage, envelope_from: str | None, recipients: list[str]
) -> Inbound:
    spf, dkim = results_of([str(v) for v in message.get_all("Authentication-Results") or []])
    return Inbound(
        sender=address_of(str(message.get("From") or "")),
        envelope_from=envelope_from,
        recipients=tuple(recipients),
        subject=" ".join(str(message.get("Subject") or "").split()),
        message_id=str(message.get("Message-ID") or "").strip(),
        text=body_text(message),
        automatic=automatic(message),
        spf=spf,
        dkim=dkim,
    )


def _same(a: str, b: str) -> bool:
    return bool(a) and a.strip().casefold() == b.strip().casefold()


class Replies:
    def __init__(
        self,
        store: Store,
        slack: SlackStore,
        *,
        domain: str,
        public_url: str,
        relay: Relay | None,
        timeout: float,
    ) -> None:
        self.store = store
        self.slack = slack
        self.domain = domain
        self.public_url = public_url.rstrip("/")
        self.outgoing = Outgoing(relay, timeout) if relay is not None else None

    def ours(self, address: str) -> str | None:
        """The token of one of this server's reply addresses."""
        return reply_token(address, self.domain)

    async def known(self, address: str) -> bool:
        """Whether the address is a reply address this server sent."""
        token = self.ours(address)
        return token is not None and await self.store.mail_reply_holder(token) is not None

    async def take(self, mail: Inbound) -> Outcome:
        """Handles one mail; what became of it. Raises nothing of the store's."""
        token = next((t for t in map(self.ours, mail.recipients) if t), None)
        holder = await self.store.mail_reply_holder(token) if token else None
        if holder is None or token is None:
            return Outcome.UNKNOWN_ADDRESS
        reply_to = f"ask+{token}@{self.domain}"
        if mail.automatic or mail.envelope_from == "":
            # Never an answer, and never a mail back (no loops with auto-responders).
            return Outcome.AUTOMATIC
        reported = [r for r in (mail.spf, mail.dkim) if r is not None]
        if reported and _PASSED not in reported:
            log.info("a reply to %s failed the relay's SPF and DKIM checks", reply_to)
            return Outcome.UNVERIFIED
        if not _same(mail.sender, holder.email) or (
            mail.envelope_from is not None and not _same(mail.envelope_from, holder.email)
        ):
            await self._mail(
                mail,
                reply_to,
                "Nothing was recorded: this address answers only for the person Compass "
                "mailed, and this reply comes from another address. A forwarded mail "
                "can't answer an ask.",
            )
            return Outcome.NOT_YOURS
        outcome, said = await self._answer(holder, mail.text)
        await self._mail(mail, reply_to, said)
        return outcome

    async def _answer(self, holder: ReplyHolder, text: str) -> tuple[Outcome, str]:
        try:
            actor = await self.store.act_on_ask(
                holder.workspace_id, holder.ask_id, holder.account_id
            )
        except FailedPrecondition:
            return Outcome.ENDED, await self._ended(holder)
        except (PermissionDenied, NotFound):
            return Outcome.ENDED, "Nothing was recorded: this ask is no longer yours to answer."
        try:
            _, ask = await self.store.get_ask(actor, holder.ask_id)
        except StoreError:
            return Outcome.ENDED, "Nothing was recorded: this ask is no longer yours to answer."
        if len(ask.questions) != 1 or not ask.questions[0].options:
            return Outcome.NEEDS_PAGE, (
                "Nothing was recorded: this ask needs more than a reply's first line can "
                f"say. Answer it here: {await self._link(holder)}"
            )
        question = ask.questions[0]
        line = first_line(text)
        choice = read_choice(line, question) if line else None
        if choice is None:
            return Outcome.UNREADABLE, (
                "Nothing was recorded: the first line of your reply names none of the "
                "options. Reply again with one of these on the first line:\n\n"
                + _menu(ask)
                + f"\n\nor open the ask: {await self._link(holder)}"
            )
        try:
            return await self._record(actor, holder, ask, choice)
        except Conflict:
            return Outcome.ENDED, await self._ended(holder)
        except InvalidArgument as exc:
            return Outcome.UNREADABLE, f"Nothing was recorded: {exc.message}."
        except StoreError as exc:
            return Outcome.ENDED, f"Nothing was recorded: {exc.message}."

    async def _record(
        self, actor: Actor, holder: ReplyHolder, ask: Ask, choice: Choice
    ) -> tuple[Outcome, str]:
        if choice.declined:
            # A person's words take the one rule every surface keeps.
            check_text(choice.reason, "Your reason")
            await self.store.decline_ask(actor, holder.ask_id, choice.reason, surface=Surface.EMAIL)
            why = f" ({choice.reason})" if choice.reason else ""
            return Outcome.DECLINED, f"Recorded: you declined this ask{why}, as {holder.handle}."
        question = ask.questions[0]
        await self.store.answer_ask(
            actor,
            holder.ask_id,
            [Answer(question.question_id, (choice.option_id,), "")],
            surface=Surface.EMAIL,
        )
        return Outcome.ANSWERED, (
            f"Recorded: your answer to “{question.header or question.question}” is "
            f"“{choice.option_label}”, as {holder.handle}."
        )

    async def _ended(self, holder: ReplyHolder) -> str:
        ended = await self.slack.ending_of(holder.workspace_id, holder.ask_id)
        if ended is None:
            return "Nothing was recorded: this ask has ended."
        kind, reason, handle = ended
        return f"Nothing was recorded: this ask has ended: {_ending(kind, reason, handle)}."

    async def _link(self, holder: ReplyHolder) -> str:
        try:
            minted = await self.store.mint_ask_link(
                holder.workspace_id, holder.ask_id, holder.account_id
            )
        except StoreError:
            return f"{self.public_url}/#/ask/{holder.ask_id}"
        return f"{self.public_url}/a/{minted.secret}"

    async def _mail(self, mail: Inbound, reply_to: str, said: str) -> None:
        """The answer to a reply, to its sender, in its thread."""
        if self.outgoing is None or not mail.sender:
            return
        msg = email.message.EmailMessage()
        msg["From"] = f"Compass <{reply_to}>"
        msg["To"] = mail.sender
        subject = mail.subject or "your reply"
        msg["Subject"] = subject if subject.lower().startswith("re:") else f"Re: {subject}"
        msg["Date"] = email.utils.formatdate(usegmt=True)
        msg["Message-ID"] = f"<reply.{uuid.uuid4().hex}@{self.domain}>"
        if mail.message_id:
            msg["In-Reply-To"] = mail.message_id
            msg["References"] = mail.message_id
        msg["Auto-Submitted"] = "auto-replied"
        msg.set_content(said + "\n")
        try:
            await self.outgoing.send(msg, sender=reply_to, recipients=[mail.sender])
        except Exception as exc:
            log.warning("the answer to a reply wasn't sent (%s)", type(exc).__name__)


def _menu(ask: Ask) -> str:
    options = ask.questions[0].options
    lines = [f"  {i}. {o.label}" for i, o in enumerate(options, 1)]
    return "\n".join([*lines, "  decline: your reason"])


def _ending(kind: str, reason: str, handle: str) -> str:
    by = handle or "someone"
    if kind == "answered":
        return f"answered by {by}"
    if kind == "declined":
        return f"declined by {by}" + (f": {reason}" if reason else "")
    if kind in ("withdrawn_by_agent", "withdrawn_by_owner"):
        return f"withdrawn by {by}" + (f": {reason}" if reason else "")
    return "expired"
