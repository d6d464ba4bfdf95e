"""Reading a reply: whose address it was sent to, the reply's own words
(quoted text and signatures left out), and the choice its first line names."""

from __future__ import annotations

import dataclasses
import email.utils
import html
import re

from compass_server.store.replies import TOKEN_SHAPE
from compass_server.store.types import AskQuestion

_LOCAL = re.compile(r"ask\+([A-Za-z2-7]{24})", re.I)
# Where the quoted mail begins in the common clients' replies.
_QUOTE_STARTS = (
    re.compile(r"^-{2,}\s*Original Message\s*-{2,}$", re.I),
    re.compile(r"^_{10,}$"),
    re.compile(r"^(From|Sent|De|Von):\s", re.I),
)
_NUMBERED = re.compile(r"(\d{1,3})\s*[.):]?\s*(.*)")
_DECLINE = re.compile(r"decline\b\s*[:\-–—]?\s*(.*)", re.I | re.S)


def address_of(text: str) -> str:
    """The bare address of a header's value (`Ada <ada@x>` → `ada@x`)."""
    return email.utils.parseaddr(text)[1].strip()


def reply_token(address: str, domain: str) -> str | None:
    """The token of a reply address `ask+TOKEN@domain`; None for any other."""
    local, _, host = address_of(address).rpartition("@")
    if not domain or host.lower() != domain.lower():
        return None
    found = _LOCAL.fullmatch(local)
    if found is None:
        return None
    token = found.group(1).lower()
    return token if TOKEN_SHAPE.fullmatch(token) else None


def own_lines(text: str) -> list[str]:
    """The reply's own lines: up to its signature ("-- ") or the quoted mail
    ("On … wrote:", "-----Original Message-----", a "From:" block), with
    quoted lines ("> …") left out."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    for i, line in enumerate(lines):
        if line in ("-- ", "--"):
            break
        bare = line.strip()
        after = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if bare.startswith("On ") and (bare.endswith("wrote:") or after.endswith("wrote:")):
            break
        if any(p.match(bare) for p in _QUOTE_STARTS) and out:
            break
        if bare.startswith(">"):
            continue
        out.append(line)
    return out


def first_line(text: str) -> str:
    """The first non-empty line the person wrote."""
    for line in own_lines(text):
        if line.strip():
            return " ".join(line.split())
    return ""


def text_of_html(markup: str) -> str:
    """An HTML body's text, line by line (a reply sent as HTML alone)."""
    markup = re.sub(r"(?is)<(script|style)\b.*?</\1>", "", markup)
    markup = re.sub(r"(?is)<blockquote\b.*?</blockquote>", "", markup)
    markup = re.sub(r"(?i)<br\s*/?>|</(p|div|li|tr|h\d)>", "\n", markup)
    return html.unescape(re.sub(r"<[^>]*>", "", markup))


@dataclasses.dataclass(frozen=True, slots=True)
class Choice:
    """What a first line says: an option of the question, or a decline."""

    option_id: str = ""
    option_label: str = ""
    declined: bool = False
    reason: str = ""


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold().rstrip(".!")


def read_choice(line: str, question: AskQuestion) -> Choice | None:
    """The option a first line names (its number, its label, or both as
    "2. No"), or "decline" with an optional reason; None when it names none."""
    line = line.strip()
    declined = _DECLINE.fullmatch(line)
    if declined is not None:
        return Choice(declined=True, reason=declined.group(1).strip())
    options = question.options
    numbered = _NUMBERED.fullmatch(line)
    if numbered is not None:
        n, rest = int(numbered.group(1)), numbered.group(2)
        if 1 <= n <= len(options):
            option = options[n - 1]
            if not rest.strip() or _fold(rest) == _fold(option.label):
                return Choice(option.id, option.label)
        if not rest.strip():
            return None
    said = _fold(line)
    for option in options:
        if said in (_fold(option.label), option.id.casefold()):
            return Choice(option.id, option.label)
    return None
