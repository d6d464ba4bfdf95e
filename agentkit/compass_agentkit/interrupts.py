"""What the framework adapters share: an interrupt (LangGraph's `interrupt()`
payload, an Agents SDK tool approval) becomes one Compass ask posted by the
agent's session, and the ask's ending becomes the value the framework
resumes with; which ask answers which interrupt, and what it answered, is
kept in PostgreSQL, so a process that restarts resumes without asking twice
or losing an answer.

The way an interrupt's value maps (`map_value`):

- LangChain's human-in-the-loop middleware (`{"action_requests": […],
  "review_configs": […]}`): one question per action, its options the
  decisions the review allows (Approve, Edit, Reject, Respond). It resumes
  with `{"decisions": [...]}`, one per action in order: approve; edit with
  `edited_action` {name, args} from the JSON typed under Other; reject or
  respond with the text typed as `message`. Free text with no option is a
  reject. Any other ending (declined, expired, withdrawn) rejects every
  action, its words as the message: nothing is approved that nobody approved.
- The coding agents' question shape (`{"questions": [...]}`): resumes with
  `{"answers": {question text: "label, label, text"}}`.
- A question (`{"question": …, "options": [labels]}`) or a plain string:
  resumes with the chosen labels and the text, joined by ", ".
- Anything else is shown as JSON and answered in free text.

An ending that is no answer resumes the question shapes with None.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_agentkit.endings import Ending, ending_of
from compass_agentkit.native_ask import MappedAsk, answers_from_ask, map_coding_agent_ask

__all__ = ["AskBook", "Asker", "Mapped", "map_value"]

# The text shown above an interrupt's ask, at most (the server's limit is 32,000).
MAX_TEXT_CHARS = 4_000
# An option's label, at most.
MAX_LABEL_CHARS = 200

HITL_OPTIONS = {
    "approve": ("Approve", "Run it as it is."),
    "edit": ("Edit", "Type the new arguments as a JSON object under Other."),
    "reject": ("Reject", "Don't run it; what you type under Other is the reason the model reads."),
    "respond": ("Respond", "Don't run it; what you type under Other is the tool's result."),
}


@dataclasses.dataclass(frozen=True, slots=True)
class Mapped:
    """An interrupt as an ask, and how its ending becomes the resume value."""

    ask: pb.Ask
    text: str
    resume: Callable[[Ending], Any]


def _label(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_LABEL_CHARS else text[: MAX_LABEL_CHARS - 1] + "…"


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 1] + "…"


def _answer_of(result_labels: list[str], text: str | None) -> str:
    return ", ".join([*result_labels, *([text] if text else [])])


def _hitl(value: Mapping[str, Any]) -> Mapped:
    requests = list(value.get("action_requests") or [])
    configs = {
        c.get("action_name"): c for c in value.get("review_configs") or [] if isinstance(c, dict)
    }
    questions = []
    for i, req in enumerate(requests):
        name = str(req.get("name", ""))
        allowed = configs.get(name, {}).get("allowed_decisions") or ["approve", "reject"]
        options = [
            pb.AskOption(id=d, label=HITL_OPTIONS[d][0], description=HITL_OPTIONS[d][1])
            for d in allowed
            if d in HITL_OPTIONS
        ]
        described = req.get("description") or f"Run {name} with {_json(req.get('args', {}))}?"
        questions.append(
            pb.AskQuestion(
                question_id=str(i + 1),
                question=_clip(str(described)),
                header=_label(name)[:100],
                options=options,
            )
        )

    def resume(ending: Ending) -> Any:
        if ending.name != "answered":
            return {"decisions": [{"type": "reject", "message": ending.text} for _ in requests]}
        results = {r.question_id: r for r in answers_from_ask(ending.ask)}
        decisions: list[dict[str, Any]] = []
        for i, req in enumerate(requests):
            result = results.get(str(i + 1))
            chosen = result.selected_options if result else []
            text = (result.custom_input or "") if result else ""
            kind = next((d for d, (label, _) in HITL_OPTIONS.items() if label in chosen), "")
            if kind == "approve":
                decisions.append({"type": "approve"})
            elif kind == "edit":
                try:
                    args = json.loads(text)
                    if not isinstance(args, dict):
                        raise ValueError("not an object")
                    decisions.append(
                        {"type": "edit", "edited_action": {"name": req.get("name"), "args": args}}
                    )
                except ValueError:
                    decisions.append(
                        {
                            "type": "reject",
                            "message": "the edited arguments were not a JSON object; not run",
                        }
                    )
            elif kind == "respond":
                decisions.append({"type": "respond", "message": text})
            else:
                decisions.append({"type": "reject", **({"message": text} if text else {})})
        return {"decisions": decisions}

    return Mapped(pb.Ask(questions=questions), "", resume)


def _answers(ending: Ending) -> dict[str, str]:
    by_id = {q.question_id: q.question for q in ending.ask.questions}
    out = {}
    for r in answers_from_ask(ending.ask):
        said = _answer_of(r.selected_options, r.custom_input)
        if said:
            out[by_id[r.question_id]] = said
    return out


def map_value(value: object) -> Mapped:
    """An interrupt's value as an ask, and its ending as the resume value."""
    if isinstance(value, dict) and isinstance(value.get("action_requests"), list):
        return _hitl(value)
    if isinstance(value, dict) and "questions" in value:
        mapped = map_coding_agent_ask(value)
        if isinstance(mapped, MappedAsk):
            return Mapped(
                mapped.ask,
                "",
                lambda e: {"answers": _answers(e)} if e.name == "answered" else None,
            )
    if isinstance(value, dict) and isinstance(value.get("question"), str):
        options = [
            o if isinstance(o, dict) else {"label": str(o)} for o in value.get("options") or []
        ]
        question = pb.AskQuestion(
            question_id="1",
            question=_clip(value["question"]),
            options=[
                pb.AskOption(
                    id=str(j),
                    label=_label(str(o.get("label", ""))),
                    description=str(o.get("description", "")),
                )
                for j, o in enumerate(options)
            ],
            allow_multiple=bool(value.get("multiple", False)),
        )
    else:
        shown = value if isinstance(value, str) else _json(value)
        question = pb.AskQuestion(question_id="1", question=_clip(shown))

    def resume(ending: Ending) -> Any:
        if ending.name != "answered":
            return None
        results = answers_from_ask(ending.ask)
        return _answer_of(results[0].selected_options, results[0].custom_input) if results else ""

    return Mapped(pb.Ask(questions=[question]), "", resume)


def client_key(scope: str, key: str) -> str:
    """One post per interrupt, however often a restarted process asks."""
    return "interrupt:" + hashlib.sha256(f"{scope}\x00{key}".encode()).hexdigest()


class CallFailed(Exception):
    """Compass refused a call; `code` is its status token."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class Asker:
    """Posts asks as an agent's session (the kit's AgentSession, or anything
    with its `call` and `endings`) and waits for how they end."""

    def __init__(self, session: Any, channel_id: str) -> None:
        self.session = session
        self.channel_id = channel_id

    async def _call(self, request: gw.CommsCallRequest) -> gw.CommsCallResult:
        result: gw.CommsCallResult = await self.session.call(request)
        if result.HasField("error"):
            raise CallFailed(result.error.code, result.error.message)
        return result

    async def post(self, mapped: Mapped, text: str, key: str) -> str:
        """The ask's id: posted now, or earlier under the same key."""
        result = await self._call(
            gw.CommsCallRequest(
                post_ask=gw.PostAskRequest(
                    channel_id=self.channel_id, text=text, ask=mapped.ask, client_key=key
                )
            )
        )
        return str(result.post_ask.ask_id)

    async def ended(self, ask_id: str) -> Ending | None:
        """The ask's ending if it has one now (read from the server)."""
        result = await self._call(gw.CommsCallRequest(get_ask=gw.GetAskRequest(ask_id=ask_id)))
        ending = ending_of(result.get_ask.ask)
        if ending is not None:
            self.session.endings.ended(ending)
        return ending

    async def ending(self, ask_id: str) -> Ending:
        """The ask's ending, once it has one."""
        known = self.session.endings.get(ask_id) or await self.ended(ask_id)
        if known is not None:
            return known
        ending: Ending = await self.session.endings.wait(ask_id)
        return ending


_TABLE = """
CREATE TABLE IF NOT EXISTS {table} (
  scope text NOT NULL,
  key text NOT NULL,
  ask_id text NOT NULL,
  resume jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (scope, key)
)"""
_STATES = """
CREATE TABLE IF NOT EXISTS {table}_runs (
  scope text PRIMARY KEY,
  state text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
)"""


class AskBook:
    """Which ask answers which interrupt (by scope, a thread or a run, and
    key, the interrupt's id), and the resume value once it ended; an Agents
    SDK run's state too. In the application's PostgreSQL, beside its
    checkpoints."""

    def __init__(self, conn_string: str, table: str = "compass_interrupts") -> None:
        if not table.replace("_", "").isalnum():
            raise ValueError(f"table must be a plain name, not {table!r}")
        self.conn_string = conn_string
        self.table = table

    async def _run(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.conn_string, autocommit=True) as conn:
            cur = await conn.execute(sql.format(table=self.table), params)
            return await cur.fetchall() if cur.description else []

    async def setup(self) -> None:
        await self._run(_TABLE)
        await self._run(_STATES)

    async def find(self, scope: str, key: str) -> tuple[str, Any, bool] | None:
        """(ask id, resume value, whether it has one) for the interrupt."""
        rows = await self._run(
            "SELECT ask_id, resume, resume IS NOT NULL FROM {table} "
            "WHERE scope = %(s)s AND key = %(k)s",
            {"s": scope, "k": key},
        )
        return (rows[0][0], rows[0][1], rows[0][2]) if rows else None

    async def record(self, scope: str, key: str, ask_id: str) -> None:
        await self._run(
            "INSERT INTO {table} (scope, key, ask_id) VALUES (%(s)s, %(k)s, %(a)s) "
            "ON CONFLICT (scope, key) DO NOTHING",
            {"s": scope, "k": key, "a": ask_id},
        )

    async def answered(self, scope: str, key: str, resume: Any) -> None:
        from psycopg.types.json import Jsonb

        await self._run(
            "UPDATE {table} SET resume = %(r)s WHERE scope = %(s)s AND key = %(k)s",
            {"s": scope, "k": key, "r": Jsonb({"value": resume})},
        )

    async def forget(self, scope: str, keys: list[str]) -> None:
        await self._run(
            "DELETE FROM {table} WHERE scope = %(s)s AND key = ANY(%(k)s)", {"s": scope, "k": keys}
        )

    async def save_state(self, scope: str, state: str) -> None:
        await self._run(
            "INSERT INTO {table}_runs (scope, state) VALUES (%(s)s, %(t)s) ON CONFLICT (scope) "
            "DO UPDATE SET state = excluded.state, updated_at = now()",
            {"s": scope, "t": state},
        )

    async def load_state(self, scope: str) -> str | None:
        rows = await self._run("SELECT state FROM {table}_runs WHERE scope = %(s)s", {"s": scope})
        return str(rows[0][0]) if rows else None

    async def drop_state(self, scope: str) -> None:
        await self._run("DELETE FROM {table}_runs WHERE scope = %(s)s", {"s": scope})


def _write_receipt(path: pathlib.Path, line: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(line, ensure_ascii=False) + "\n")


async def answer_all(
    book: AskBook,
    asker: Asker,
    scope: str,
    pending: Sequence[tuple[str, object, str]],
    receipts: pathlib.Path | None = None,
) -> dict[str, Any]:
    """Each pending interrupt (key, value, text shown) asked once and waited
    for; returns key → resume value, each recorded before it is returned.
    With `receipts`, each ending's signed receipt is appended there as a JSON
    line (what `compass-hook verify` checks)."""
    import asyncio

    async def one(key: str, value: object, text: str) -> tuple[str, Any]:
        mapped = map_value(value)
        found = await book.find(scope, key)
        if found is not None and found[2]:
            return key, found[1]["value"]
        ask_id = found[0] if found else await asker.post(mapped, text, client_key(scope, key))
        if found is None:
            await book.record(scope, key, ask_id)
        ending = await asker.ending(ask_id)
        resume = mapped.resume(ending)
        if receipts is not None and ending.ask.ending.receipt:
            line = {
                "ask_id": ask_id,
                "scope": scope,
                "key": key,
                "ending": ending.name,
                "decision": resume,
                "receipt": ending.ask.ending.receipt,
            }
            await asyncio.to_thread(_write_receipt, receipts, line)
        await book.answered(scope, key, resume)
        return key, resume

    done = await asyncio.gather(*(one(k, v, t) for k, v, t in pending))
    return dict(done)


def new_scope() -> str:
    return uuid.uuid4().hex
