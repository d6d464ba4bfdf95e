"""A person's notification preferences: surfaces and quiet hours.

What a person hasn't chosen is the server's default (the `notify.*`
settings). Quiet hours are minutes after midnight in the person's time zone;
a span whose end is earlier than its start runs past midnight.
"""

from __future__ import annotations

import datetime
import re
import zoneinfo
from dataclasses import dataclass
from typing import Any

from compass_server.store.errors import InvalidArgument

MAIL = ("named", "all", "off")
_HHMM = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])$")
# The longest IANA zone name kept (the longest in the tz database is 32).
MAX_ZONE = 64


@dataclass(frozen=True, slots=True)
class Preferences:
    page: bool
    push: bool
    email: str
    # Minutes after midnight in time_zone; None: no quiet hours.
    quiet_start: int | None
    quiet_end: int | None
    time_zone: str
    # A direct message from the workspace's Slack app.
    slack_dm: bool = False


def minutes(text: str, what: str) -> int | None:
    """ "HH:MM" as minutes after midnight; "" is None."""
    text = text.strip()
    if not text:
        return None
    m = _HHMM.match(text)
    if m is None:
        raise InvalidArgument(f"{what} is a time like 22:30 (24-hour HH:MM)")
    return int(m.group(1)) * 60 + int(m.group(2))


def hhmm(value: int | None) -> str:
    return "" if value is None else f"{value // 60:02d}:{value % 60:02d}"


def zone(name: str) -> zoneinfo.ZoneInfo:
    """An IANA time zone; INVALID_ARGUMENT for anything else."""
    if not name or len(name) > MAX_ZONE or name.startswith("/") or ".." in name:
        raise InvalidArgument("time_zone is an IANA time zone such as Europe/Paris")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidArgument(f"no time zone {name!r}; use one such as Europe/Paris") from None


def checked(
    page: bool,
    push: bool,
    email: str,
    quiet_start: str,
    quiet_end: str,
    time_zone: str,
    slack_dm: bool = False,
) -> Preferences:
    """Preferences from what a person sent; INVALID_ARGUMENT if malformed."""
    if email not in MAIL:
        raise InvalidArgument("email is one of: named, all, off")
    start = minutes(quiet_start, "quiet_start")
    end = minutes(quiet_end, "quiet_end")
    if (start is None) != (end is None):
        raise InvalidArgument("quiet hours need both quiet_start and quiet_end, or neither")
    if start is not None and start == end:
        raise InvalidArgument("quiet_start and quiet_end are the same time")
    zone(time_zone.strip())
    return Preferences(page, push, email, start, end, time_zone.strip(), slack_dm)


def resolved(row: dict[str, Any] | None, defaults: Preferences) -> Preferences:
    """A stored row (or none) with the defaults filling what it leaves out."""
    if row is None:
        return defaults
    quiet = row["quiet_start"] is not None
    return Preferences(
        defaults.page if row["page"] is None else row["page"],
        defaults.push if row["push"] is None else row["push"],
        row["email"] or defaults.email,
        row["quiet_start"] if quiet else defaults.quiet_start,
        row["quiet_end"] if quiet else defaults.quiet_end,
        row["time_zone"] or defaults.time_zone,
        defaults.slack_dm if row.get("slack_dm") is None else row["slack_dm"],
    )


def quiet_now(prefs: Preferences, now: datetime.datetime | None = None) -> bool:
    """Whether it is the person's quiet hours at `now` (aware; default: now)."""
    if prefs.quiet_start is None or prefs.quiet_end is None:
        return False
    try:
        tz: datetime.tzinfo = zone(prefs.time_zone)
    except InvalidArgument:
        tz = datetime.UTC
    local = (now or datetime.datetime.now(datetime.UTC)).astimezone(tz)
    at = local.hour * 60 + local.minute
    start, end = prefs.quiet_start, prefs.quiet_end
    if start < end:
        return start <= at < end
    return at >= start or at < end


def quiet_hours_of(text: str) -> tuple[int | None, int | None]:
    """The setting's "HH:MM-HH:MM" as minutes; "" as none."""
    if not text.strip():
        return None, None
    start, _, end = text.partition("-")
    return minutes(start, "start"), minutes(end, "end")


def quiet_ends(
    prefs: Preferences, now: datetime.datetime | None = None
) -> datetime.datetime | None:
    """When the person's quiet hours that `now` falls in end (aware); None
    when it isn't their quiet hours."""
    now = now or datetime.datetime.now(datetime.UTC)
    if not quiet_now(prefs, now) or prefs.quiet_end is None:
        return None
    try:
        tz: datetime.tzinfo = zone(prefs.time_zone)
    except InvalidArgument:
        tz = datetime.UTC
    local = now.astimezone(tz)
    end = local.replace(
        hour=prefs.quiet_end // 60, minute=prefs.quiet_end % 60, second=0, microsecond=0
    )
    if end <= local:
        end += datetime.timedelta(days=1)
    return end


def held(
    prefs: Preferences, now: datetime.datetime | None = None
) -> tuple[str, datetime.timedelta] | None:
    """Why and for how long a notification that isn't urgent waits: until
    the person's quiet hours end. None: it goes now."""
    now = now or datetime.datetime.now(datetime.UTC)
    end = quiet_ends(prefs, now)
    if end is None:
        return None
    why = f"held: the person's quiet hours, until {end:%H:%M} {prefs.time_zone}"
    # A second past the end, so the next attempt finds the hours over.
    return why, end - now + datetime.timedelta(seconds=1)
