"""A hook token's policy: per tool and pattern, whether Compass asks, who may
answer and how many must.

Written as TOML (docs/agents.md has examples):

    [groups]
    on-call = ["ada", "grace", "lin"]

    [[rules]]
    name = "force push"
    tool = "Bash"
    match = ["git push --force*", "git push -f*"]
    answerers = ["@on-call"]
    quorum = 2

    [[rules]]
    name = "quiet reads"
    tool = "Read|Glob|Grep"
    ask = false

The first rule whose `tool` and `match` (and none of its `unless`) fit a
request decides it; a request no rule fits is asked of anyone in the
channel. `tool` reads as a harness's matcher does: names separated by `|`,
or `*` for any. A pattern is a glob over the request's subject (a command,
a file path, a URL; the input as JSON for other tools) that must match it
whole; its `*` and `?` never match a shell separator (`;`, `&`, `|`, a line
break, a backquote or `$(`), so `npm test*` never matches
`npm test; rm -rf /`.
"""

from __future__ import annotations

import json
import re
import tomllib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from compass_server.store.blocks import MAX_ANSWERERS
from compass_server.store.errors import InvalidArgument

# A policy's text, at most; its rules and patterns.
MAX_POLICY_CHARS = 64 * 1024
MAX_RULES = 200
MAX_PATTERNS = 50
MAX_PATTERN_CHARS = 500
MAX_NAME_CHARS = 80
# What may be in a rule, and in the file.
_RULE_KEYS = frozenset(
    {"name", "tool", "match", "unless", "ask", "answerers", "quorum", "always_allow"}
)
_TOP_KEYS = frozenset({"groups", "rules"})
# A glob's wildcards never cross these: a pattern can't vouch for a second
# command chained onto the one it names.
_SEPARATORS = ";&|\n\r`"
_ANY = r"(?:(?!\$\()[^" + re.escape(_SEPARATORS) + r"])"
_TOOL_LIST = re.compile(r"[A-Za-z0-9_\-|, ]+")


def _glob(pattern: str) -> re.Pattern[str]:
    parts = []
    for char in pattern:
        if char == "*":
            parts.append(_ANY + "*")
        elif char == "?":
            parts.append(_ANY)
        else:
            parts.append(re.escape(char))
    return re.compile("".join(parts), re.S)


def _tools(matcher: str) -> frozenset[str] | None:
    """The tool names a matcher names; None for any tool."""
    if matcher.strip() in ("", "*"):
        return None
    return frozenset(t.strip() for t in re.split(r"[|,]", matcher) if t.strip())


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    tool: str = "*"
    match: tuple[str, ...] = ("*",)
    unless: tuple[str, ...] = ()
    ask: bool = True
    # Who may answer (people's account ids and handles); empty: anyone in the channel.
    answerer_ids: tuple[uuid.UUID, ...] = ()
    answerer_handles: tuple[str, ...] = ()
    quorum: int = 0
    always_allow: bool = True
    _patterns: tuple[re.Pattern[str], ...] = field(default=(), compare=False, repr=False)
    _unless: tuple[re.Pattern[str], ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_patterns", tuple(_glob(p) for p in self.match))
        object.__setattr__(self, "_unless", tuple(_glob(p) for p in self.unless))

    def fits(self, tool: str, subject: str) -> bool:
        names = _tools(self.tool)
        if names is not None and tool not in names:
            return False
        if not any(p.fullmatch(subject) for p in self._patterns):
            return False
        return not any(p.fullmatch(subject) for p in self._unless)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tool": self.tool,
            "match": list(self.match),
            "unless": list(self.unless),
            "ask": self.ask,
            "answerer_ids": [str(a) for a in self.answerer_ids],
            "answerer_handles": list(self.answerer_handles),
            "quorum": self.quorum,
            "always_allow": self.always_allow,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Rule:
        return cls(
            name=str(raw["name"]),
            tool=str(raw.get("tool", "*")),
            match=tuple(raw.get("match", ("*",))),
            unless=tuple(raw.get("unless", ())),
            ask=bool(raw.get("ask", True)),
            answerer_ids=tuple(uuid.UUID(a) for a in raw.get("answerer_ids", ())),
            answerer_handles=tuple(raw.get("answerer_handles", ())),
            quorum=int(raw.get("quorum", 0)),
            always_allow=bool(raw.get("always_allow", True)),
        )


# A request no rule fits: asked of anyone in the channel, "always" scoped to
# the exact request.
DEFAULT_RULE = Rule(name="")


@dataclass(frozen=True, slots=True)
class Policy:
    rules: tuple[Rule, ...] = ()

    def rule_for(self, tool: str, subject: str) -> Rule:
        return next((r for r in self.rules if r.fits(tool, subject)), DEFAULT_RULE)

    def to_json(self) -> dict[str, Any]:
        return {"rules": [r.to_json() for r in self.rules]}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Policy:
        return cls(tuple(Rule.from_json(r) for r in raw.get("rules", ())))


@dataclass(frozen=True, slots=True)
class Draft:
    """A policy as written: people named by handle, not yet looked up."""

    rules: tuple[dict[str, Any], ...]

    def handles(self) -> set[str]:
        return {h for r in self.rules for h in r["answerers"]}

    def resolve(self, ids: Mapping[str, uuid.UUID]) -> Policy:
        """The policy, each person by account id (`ids`: handle → id of the
        workspace's active people); InvalidArgument naming who is missing."""
        missing = sorted(self.handles() - set(ids))
        if missing:
            raise InvalidArgument(
                "the policy names "
                + ", ".join(f"@{h}" for h in missing[:5])
                + (" and more" if len(missing) > 5 else "")
                + ", who is no active person of the workspace"
            )
        rules = []
        for r in self.rules:
            handles = tuple(r["answerers"])
            rules.append(
                Rule(
                    name=r["name"],
                    tool=r["tool"],
                    match=r["match"],
                    unless=r["unless"],
                    ask=r["ask"],
                    answerer_ids=tuple(ids[h] for h in handles),
                    answerer_handles=handles,
                    quorum=r["quorum"],
                    always_allow=r["always_allow"],
                )
            )
        return Policy(tuple(rules))


def _strings(value: object, where: str, most: int) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidArgument(f"{where} is a string or a list of strings")
    if len(value) > most:
        raise InvalidArgument(f"{where} has {len(value)} entries; the limit is {most}")
    for v in value:
        if not v or len(v) > MAX_PATTERN_CHARS:
            raise InvalidArgument(f"{where} entries are 1 to {MAX_PATTERN_CHARS} characters")
    return tuple(value)


def _who(value: object, groups: Mapping[str, tuple[str, ...]], where: str) -> tuple[str, ...]:
    named = _strings(value, where, MAX_ANSWERERS)
    handles: list[str] = []
    for n in named:
        if n.startswith("@"):
            if n[1:] not in groups:
                raise InvalidArgument(f"{where} names the group {n}, which [groups] lacks")
            handles += groups[n[1:]]
        else:
            handles.append(n)
    unique = tuple(dict.fromkeys(handles))
    if len(unique) > MAX_ANSWERERS:
        raise InvalidArgument(f"{where} names {len(unique)} people; the limit is {MAX_ANSWERERS}")
    return unique


def parse(text: str) -> Draft:
    """A policy's TOML, checked: InvalidArgument says what is wrong, where."""
    if len(text) > MAX_POLICY_CHARS:
        raise InvalidArgument(f"a policy is at most {MAX_POLICY_CHARS} characters")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidArgument(f"the policy is not TOML: {exc}") from None
    return check(raw)


def check(raw: Mapping[str, Any]) -> Draft:
    unknown = sorted(set(raw) - _TOP_KEYS)
    if unknown:
        raise InvalidArgument(f"the policy has no setting {unknown[0]!r} (it takes groups, rules)")
    groups_raw = raw.get("groups", {})
    if not isinstance(groups_raw, dict):
        raise InvalidArgument("groups is a table of name = [handles]")
    groups = {
        str(name): _strings(members, f"groups.{name}", MAX_ANSWERERS)
        for name, members in groups_raw.items()
    }
    rules_raw = raw.get("rules", [])
    if not isinstance(rules_raw, list) or not all(isinstance(r, dict) for r in rules_raw):
        raise InvalidArgument("rules is a list of [[rules]] tables")
    if len(rules_raw) > MAX_RULES:
        raise InvalidArgument(f"the policy has {len(rules_raw)} rules; the limit is {MAX_RULES}")
    rules: list[dict[str, Any]] = []
    names: set[str] = set()
    for i, r in enumerate(rules_raw):
        where = f"rules[{i}]"
        unknown = sorted(set(r) - _RULE_KEYS)
        if unknown:
            raise InvalidArgument(
                f"{where} has no setting {unknown[0]!r} (a rule takes "
                + ", ".join(sorted(_RULE_KEYS))
                + ")"
            )
        name = r.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
            raise InvalidArgument(f"{where}.name is 1 to {MAX_NAME_CHARS} characters")
        if name in names:
            raise InvalidArgument(f"{where}.name {name!r} names an earlier rule too")
        names.add(name)
        tool = r.get("tool", "*")
        if not isinstance(tool, str) or not (tool == "*" or _TOOL_LIST.fullmatch(tool)):
            raise InvalidArgument(
                f"{where}.tool is * or tool names separated by | (letters, digits, _ and -)"
            )
        flags = {k: r.get(k, True) for k in ("ask", "always_allow")}
        for k, v in flags.items():
            if not isinstance(v, bool):
                raise InvalidArgument(f"{where}.{k} is true or false")
        answerers = _who(r.get("answerers", []), groups, f"{where}.answerers")
        quorum = r.get("quorum", 0)
        if not isinstance(quorum, int) or isinstance(quorum, bool):
            raise InvalidArgument(f"{where}.quorum is a whole number")
        if quorum and not 1 <= quorum <= len(answerers):
            raise InvalidArgument(
                f"{where}.quorum is {quorum}; a quorum is 1 to the number of answerers the rule "
                f"names ({len(answerers)})"
            )
        rules.append(
            {
                "name": name,
                "tool": tool,
                "match": _strings(r.get("match", "*"), f"{where}.match", MAX_PATTERNS),
                "unless": _strings(r.get("unless", []), f"{where}.unless", MAX_PATTERNS),
                "ask": flags["ask"],
                "answerers": answerers,
                "quorum": quorum,
                "always_allow": flags["always_allow"],
            }
        )
    return Draft(tuple(rules))


def subject_of(tool: str, tool_input: Mapping[str, Any]) -> str:
    """What a rule's patterns match for a request: the command, the file,
    the URL or the query it names; the input as JSON for any other tool."""
    for key in ("command", "file_path", "notebook_path", "url", "query", "pattern"):
        value = tool_input.get(key)
        if isinstance(value, str):
            return value
    return json.dumps(tool_input, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
