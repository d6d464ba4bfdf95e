"""LangGraph's `interrupt()` answered by people through Compass.

    from compass_agentkit.langgraph import CompassInterrupts

    hitl = CompassInterrupts(session, channel_id, "postgresql://…")   # the kit's AgentSession
    await hitl.setup()                      # its table, beside the checkpointer's
    values = await hitl.run(graph, inputs, {"configurable": {"thread_id": "t-1"}})

`run` invokes the graph; while the thread is paused at interrupts, each
pending interrupt (several at once, by its id) becomes one Compass ask, and
the thread resumes with `Command(resume={id: value, …})` as soon as they
have ended. The graph needs a checkpointer (`AsyncPostgresSaver`, say).
Which ask answers which interrupt, and the resume value once it ended, are
kept in PostgreSQL: a process that restarts calls `run(graph, None, config)`
and the thread resumes without asking again or losing an answer given
meanwhile. How values map (human-in-the-loop middleware decisions,
questions, plain strings) is in `compass_agentkit.interrupts`.

Needs the `langgraph` extra (`pip install './agentkit[langgraph]'`).
"""

from __future__ import annotations

import pathlib
from typing import Any

from langgraph.types import Command

from compass_agentkit.interrupts import AskBook, Asker, answer_all

__all__ = ["CompassInterrupts"]


def _pending(state: Any) -> list[tuple[str, object]]:
    """The thread's pending interrupts: (id, value), in task order."""
    found = []
    for task in getattr(state, "tasks", ()) or ():
        for interrupt in getattr(task, "interrupts", ()) or ():
            found.append((str(interrupt.id), interrupt.value))
    return found


class CompassInterrupts:
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

    async def run(self, graph: Any, inputs: Any, config: dict[str, Any]) -> Any:
        """The graph's values once it ran to its end, every interrupt on the
        way answered through Compass. With `inputs` None, a thread already
        paused goes on from where it is (after a restart)."""
        thread = str(config["configurable"]["thread_id"])
        state = await graph.aget_state(config)
        if not _pending(state) and inputs is not None:
            await graph.ainvoke(inputs, config)
        while True:
            state = await graph.aget_state(config)
            pending = _pending(state)
            if not pending:
                return state.values
            text = f"LangGraph thread {thread} waits for a person"
            # Keyed by the pause too: a node that interrupts again later (a
            # loop) is asked anew, not answered by its last ask.
            paused = str(state.config["configurable"].get("checkpoint_id", ""))
            keys = {f"{paused}/{interrupt_id}": interrupt_id for interrupt_id, _ in pending}
            answered = await answer_all(
                self.book,
                self.asker,
                thread,
                [(f"{paused}/{interrupt_id}", value, text) for interrupt_id, value in pending],
                self.receipts,
            )
            await graph.ainvoke(
                Command(resume={keys[k]: value for k, value in answered.items()}), config
            )
            await self.book.forget(thread, list(answered))
