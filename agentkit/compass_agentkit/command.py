"""What the command lines share: compass-runner's, compass-mcp's and
compass-server's.

A usage error is one line on stderr naming what is wrong and the command's
--help, with status 2; an unknown option names the nearest known one rather
than some required option it made look missing. The kit's commands name the
server the same way (--url, with the older --grpc kept as an alias), take the
same TLS flags, log to stderr, and warn at start about a COMPASS_* variable
they don't know that is one letter away from one they do.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.metadata
import logging
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, NoReturn

from compass_agentkit.relay import CONNECT_SECONDS, tls_credentials

__all__ = [
    "ENVIRONMENT",
    "Parser",
    "add_connect_flag",
    "add_tls_flags",
    "add_url_flag",
    "address",
    "log_to_stderr",
    "tls_from",
    "unknown_environment",
    "version",
    "warn_unknown_environment",
]

# The environment the kit's commands read, and what each is for.
ENVIRONMENT: Mapping[str, str] = {
    "COMPASS_URL": "the Compass server's gRPC address (--url)",
    "COMPASS_RUNNER_TOKEN": "the runner token (--token)",
    "COMPASS_AGENT_ID": "compass-mcp's agent (--agent)",
    "COMPASS_CHANNEL_ID": "compass-mcp's default channel (--channel)",
    "COMPASS_SANDBOX": "the folder pictures are read from (--sandbox)",
    "COMPASS_TLS": "TLS to the server (--tls)",
    "COMPASS_CA_CERT": "the CA certificates to trust (--ca-cert)",
    "COMPASS_CLIENT_CERT": "the client certificate (--client-cert)",
    "COMPASS_CLIENT_KEY": "the client certificate's key (--client-key)",
    "COMPASS_CONNECT_SECONDS": "how long to try for a first connection (--connect-seconds)",
    "COMPASS_MCP_WAIT_SECONDS": "the longest an ask call waits (--wait-seconds)",
    "COMPASS_LOG_LEVEL": "the least severe level logged",
    "COMPASS_HOOK_URL": "compass-hook's Compass server, its HTTP address (--url)",
    "COMPASS_HOOK_TOKEN": "compass-hook's hook token (--token)",
}

# argparse's words for required arguments that were not given, and for a
# value that is not one of the choices.
_REQUIRED = "the following arguments are required: "
_INVALID_CHOICE = re.compile(r"argument (.+?): invalid choice: (.+?) \(choose from (.+)\)$")
# Choices listed in a usage error when none is near what was typed.
_LISTED = 6


def _not_a_choice(name: str, value: str, listed: str) -> str:
    choices = [c.strip().strip("'\"") for c in listed.split(",")]
    value = value.strip("'\"")
    near = difflib.get_close_matches(value, choices, 1, 0.6)
    if near:
        return f"{name}: unknown {value!r} (did you mean {near[0]}?)"
    if len(choices) <= _LISTED:
        return f"{name}: {value!r} is not one of " + ", ".join(choices)
    return f"{name}: unknown {value!r}"


_SWITCH = {"1": True, "true": True, "yes": True, "on": True}
_SWITCH.update({"0": False, "false": False, "no": False, "off": False, "": False})


def version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors in one line: `prog: what is wrong; see
    prog --help`. Subcommands must set `dest`, so an unknown option found
    after them is named by the subcommand that was running. A subclass's
    `hints` name what a person typing a flag that isn't one most likely
    wants, before the nearest spelling is guessed (subcommands share them)."""

    hints: ClassVar[Mapping[str, str]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._given: list[str] = []

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            innermost = self._innermost(parsed)
            innermost.error(innermost._unknown(extras) or f"unexpected {extras[0]!r}")
        return parsed

    def error(self, message: str) -> NoReturn:
        # A misspelt option makes argparse report a required one as missing:
        # name the misspelling instead.
        if message.startswith(_REQUIRED):
            message = self._unknown(self._given) or message
        choice = _INVALID_CHOICE.match(message)
        if choice:
            # An unknown option before the value may be why argparse took it for this one.
            value = choice.group(2).strip("'\"")
            before = self._given[: self._given.index(value)] if value in self._given else []
            message = self._unknown(before) or _not_a_choice(*choice.groups())
        self.exit(2, f"{self.prog}: {message}; see {self.prog} --help\n")

    def _options(self) -> list[str]:
        return [option for action in self._actions for option in action.option_strings]

    def _unknown(self, given: Iterable[str]) -> str | None:
        options = self._options()
        for word in given:
            if word == "--":
                return None
            if not word.startswith("-") or word == "-" or word[1:2].isdigit():
                continue
            flag = word.split("=", 1)[0]
            # argparse takes an unambiguous prefix of a long option.
            if any(o == flag or (flag.startswith("--") and o.startswith(flag)) for o in options):
                continue
            near = [self.hints[flag]] if flag in self.hints else []
            near = near or difflib.get_close_matches(flag, options, 1, 0.6)
            hint = f" (did you mean {near[0]}?)" if near else ""
            return f"{flag}: unknown option{hint}"
        return None

    def _innermost(self, parsed: argparse.Namespace) -> Parser:
        parser: Parser = self
        while True:
            subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            chosen = getattr(parsed, subparsers[0].dest, None) if subparsers else None
            if chosen is None or chosen not in subparsers[0].choices:
                return parser
            parser = subparsers[0].choices[chosen]


# --- the server's address -------------------------------------------------------------


def add_url_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        "--grpc",
        dest="url",
        metavar="URL",
        default=os.environ.get("COMPASS_URL", "127.0.0.1:50051"),
        help="the Compass server's gRPC address: HOST:PORT, grpc://HOST:PORT, or "
        "https://HOST:PORT for TLS (--grpc is the older name; $COMPASS_URL; default "
        "%(default)s)",
    )


def address(url: str, what: str = "the Compass server's gRPC address") -> tuple[str, bool]:
    """(HOST:PORT, whether the URL asks for TLS) from `HOST:PORT`,
    `grpc://HOST:PORT`, `http://HOST:PORT` or `https://HOST:PORT`; ValueError
    when it is none of them."""
    tls = url.startswith("https://")
    for scheme in ("http://", "https://", "grpc://"):
        url = url.removeprefix(scheme)
    url = url.rstrip("/")
    host, _, port = url.rpartition(":")
    if not host or not port.isdigit() or "/" in url:
        raise ValueError(f"{url!r} is not HOST:PORT ({what})")
    return url, tls


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds (0 or more)")
    return value


def add_connect_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--connect-seconds",
        type=_seconds,
        metavar="SECONDS",
        default=os.environ.get("COMPASS_CONNECT_SECONDS", str(CONNECT_SECONDS)),
        help="give up and exit 1 when no connection to the server is made within this long "
        "of starting (0: keep trying); once connected, a drop is retried for ever "
        "($COMPASS_CONNECT_SECONDS; default %(default)s)",
    )


# --- TLS ---------------------------------------------------------------------------------


def add_tls_flags(parser: argparse.ArgumentParser) -> None:
    """TLS to the server; any of these turns it on."""
    env = os.environ.get
    parser.add_argument(
        "--tls",
        action=argparse.BooleanOptionalAction,
        default=_SWITCH.get(env("COMPASS_TLS", "").strip().lower(), False),
        help="connect with TLS, trusting the system's CAs ($COMPASS_TLS; default off, "
        "unless a flag below is given)",
    )
    parser.add_argument(
        "--ca-cert",
        default=env("COMPASS_CA_CERT"),
        metavar="FILE",
        help="TLS, trusting the CA certificates in this PEM file ($COMPASS_CA_CERT)",
    )
    parser.add_argument(
        "--client-cert",
        default=env("COMPASS_CLIENT_CERT"),
        metavar="FILE",
        help="TLS, presenting this PEM client certificate, for a relay that requires one "
        "($COMPASS_CLIENT_CERT)",
    )
    parser.add_argument(
        "--client-key",
        default=env("COMPASS_CLIENT_KEY"),
        metavar="FILE",
        help="the client certificate's PEM key ($COMPASS_CLIENT_KEY)",
    )


def tls_from(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Sets args.credentials from the TLS flags (None: plain text); a usage
    error when the files don't make a pair or can't be read."""
    args.credentials = None
    if args.tls or args.ca_cert or args.client_cert or args.client_key:
        try:
            args.credentials = tls_credentials(args.ca_cert, args.client_cert, args.client_key)
        except ValueError as exc:
            parser.error(str(exc))


# --- logs and the environment --------------------------------------------------------


def log_to_stderr() -> None:
    """Logs on stderr at COMPASS_LOG_LEVEL (default INFO): stdout is the
    agent's output (compass-runner) or the MCP protocol (compass-mcp)."""
    logging.basicConfig(
        level=os.environ.get("COMPASS_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def one_typo_apart(a: str, b: str) -> bool:
    """Whether `b` is `a` with one letter added, dropped, changed, or two
    neighbours swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        differ = [i for i in range(len(a)) if a[i] != b[i]]
        return len(differ) == 1 or (
            len(differ) == 2
            and differ[1] == differ[0] + 1
            and a[differ[0]] == b[differ[1]]
            and a[differ[1]] == b[differ[0]]
        )
    short, long = (a, b) if len(a) < len(b) else (b, a)
    i = next((i for i in range(len(short)) if short[i] != long[i]), len(short))
    return short[i:] == long[i + 1 :]


def unknown_environment(
    env: Mapping[str, str], known: Iterable[str], *, near_only: bool = False
) -> list[str]:
    """A warning per COMPASS_* variable not in `known`, naming the nearest
    known one; with near_only, only for those one typo from a known one."""
    names = sorted(set(known))
    warnings = []
    for name in sorted(n for n in env if n.startswith("COMPASS_") and n not in names):
        if near_only:
            near = [k for k in names if one_typo_apart(name, k)][:1]
        else:
            near = difflib.get_close_matches(name, names, 1, 0.8)
        if near:
            warnings.append(f"{name} is not a variable Compass reads (did you mean {near[0]}?)")
        elif not near_only:
            warnings.append(f"{name} is not a variable Compass reads; it is ignored")
    return warnings


def warn_unknown_environment(prog: str, env: Mapping[str, str] | None = None) -> None:
    """Warns on stderr about COMPASS_* variables one typo away from one the
    kit reads. Others may be the server's (none of its names is one typo from
    the kit's), which it checks itself."""
    env = os.environ if env is None else env
    for warning in unknown_environment(env, ENVIRONMENT, near_only=True):
        print(f"{prog}: warning: {warning}", file=sys.stderr)
