"""Agent trees: the rules the database enforces (migration 0017), named.

An agent may have a parent: another agent of its workspace with the same
owner. It takes part in every channel that it or an agent above it (its
chain) is a member of, and in no other; the database's
`compass_participation` is that definition, and every read, write and
row-level security policy uses it. The rules of the tree itself (no cycle,
its depth, its size, one owner, agents only) live in the database's trigger
on accounts, under a lock per owner, so two moves can't make a cycle
between them; this module names their refusals.
"""

from __future__ import annotations

import json

import psycopg

from compass_server.store.errors import (
    FailedPrecondition,
    InvalidArgument,
    ResourceExhausted,
    StoreError,
)

# At most this many agents above an agent (migration 0017's
# compass_max_agent_depth).
MAX_AGENT_DEPTH = 8
# A tree, a root agent and every agent below it, holds at most this many
# (compass_max_tree_agents).
MAX_TREE_AGENTS = 100


def tree_refusal(exc: psycopg.Error) -> StoreError | None:
    """The error a client gets for a tree rule the database refused; None for
    any other database error."""
    state = exc.sqlstate
    if state == "CT001":
        return FailedPrecondition(
            "the new parent is the agent itself or below it; an agent can't be its own ancestor"
        )
    if state == "CT002":
        return ResourceExhausted(
            f"that would put an agent more than {MAX_AGENT_DEPTH} agents below its root, "
            "the most a tree may be deep"
        )
    if state == "CT003":
        return ResourceExhausted(
            f"that tree would hold more than {MAX_TREE_AGENTS} agents, the most a tree may hold"
        )
    if state == "CT004":
        return InvalidArgument("a parent is an agent with the same owner, and only agents have one")
    if state == "CT006":
        waiting = json.loads(exc.diag.message_detail or "{}")
        return FailedPrecondition(
            f"@{waiting.get('handle', '?')} has {waiting.get('open_asks', '?')} open ask(s) in "
            "channels it may no longer reach once moved; an agent moves, with the agents below "
            "it, only when none of them has an open channel ask (let them end first: answered, "
            "declined, expired or withdrawn)"
        )
    return None
