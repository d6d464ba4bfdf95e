"""The OpenAI Agents SDK's tool approvals answered by people through Compass.

    from compass_agentkit.openai_agents import CompassApprovals

    approvals = CompassApprovals(session, channel_id, "postgresql://…")   # the kit's AgentSession
    await approvals.setup()
    result = await approvals.run(agent, "Clean the build folder", key="job-42")

`run` runs the agent; while the run stops at tools that need approval
(`needs_approval`, `result.interruptions`), each one becomes a Compass ask
(Approve, or Reject with the text typed as the rejection message), and the
run goes on with `state.approve(item)` / `state.reject(item,
rejection_message=…)` once they have ended. A decline, an expiry or a
withdrawal rejects: nothing runs that nobody approved. The run's state
(`RunState.to_string()`) and which ask answers which call are kept in
PostgreSQL under `key`: a process that restarts calls `run(agent, None,
key=…)` and the run goes on from where it stopped, without asking again.
The same adapter shape as `compass_agentkit.langgraph`.

Needs the `openai-agents` extra (`pip install './agentkit[openai-agents]'`).
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

from agents import Runner, RunState

from compass_agentkit.interrupts import AskBook, Asker, answer_all

__all__ = ["CompassApprovals"]


def _as_review(item: Any) -> dict[str, Any]:
    """A tool approval in the human-in-the-loop shape: one action, approve or reject."""
    try:
        args = json.loads(item.arguments or "{}")
    except ValueError:
        args = {"arguments": item.arguments}
    agent = getattr(getattr(item, "agent", None), "name", "") or "the agent"
    name = str(item.tool_name or item.name or "a tool")
    return {
        "action_requests": [
            {
                "name": name,
                "args": args,
                "description": f"{agent} asks to call {name} with "
                f"{json.dumps(args, ensure_ascii=False, sort_keys=True)}. Approve it?",
            }
        ],
        "review_configs": [{"action_name": name, "allowed_decisions": ["approve", "reject"]}],
    }


class CompassApprovals:
    def __init__(
        self,
        session: Any,
        channel_id: str,
        conn_string: str,
        *,
        table: str = "compass_interrupts",
        receipts: str | pathlib.Path | None = None,
    ) -> None:
        """`receipts`: a file each decision's signed receipt is appended to
        (a JSON line, as compass-hook writes; `compass-hook verify` checks it)."""
        self.asker = Asker(session, channel_id)
        self.book = AskBook(conn_string, table)
        self.receipts = pathlib.Path(receipts) if receipts is not None else None

    async def setup(self) -> None:
        await self.book.setup()

    async def run(self, agent: Any, inputs: Any, *, key: str, **run: Any) -> Any:
        """The run's result once no tool waits for approval. With `inputs`
        None, a run saved under `key` goes on from its saved state."""
        saved = await self.book.load_state(key)
        result: Any = None
        state: Any
        if saved is not None:
            state = await RunState.from_string(agent, saved)
            items = list(state.get_interruptions())
        else:
            result = await Runner.run(agent, inputs, **run)
            items = list(result.interruptions)
        while True:
            if not items:
                await self.book.drop_state(key)
                if result is None:
                    result = await Runner.run(agent, state, **run)
                    items = list(result.interruptions)
                    if items:
                        continue
                return result
            if result is not None:
                state = result.to_state()
            await self.book.save_state(key, state.to_string())
            pending = [
                (str(item.call_id), _as_review(item), f"An agent's run {key} waits for approval")
                for item in items
            ]
            answered = await answer_all(self.book, self.asker, key, pending, self.receipts)
            for item in items:
                (decision,) = answered[str(item.call_id)]["decisions"]
                if decision["type"] == "approve":
                    state.approve(item)
                else:
                    state.reject(item, rejection_message=decision.get("message") or None)
            await self.book.forget(key, list(answered))
            result = await Runner.run(agent, state, **run)
            items = list(result.interruptions)
