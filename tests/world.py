"""A small workspace to test against: people, agents and a channel."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from compass_server.store import Store
from compass_server.store.admin import hash_token
from compass_server.store.types import (
    AccountKind,
    Actor,
    Ask,
    AskOption,
    AskQuestion,
    Channel,
    Message,
    Operator,
    TextBlock,
)


@dataclass
class World:
    store: Store
    workspace_id: uuid.UUID
    human: Actor
    agent: Actor
    other_human: Actor
    channel: Channel
    tokens: dict[uuid.UUID, str] = field(default_factory=dict)

    @classmethod
    async def create(cls, store: Store) -> World:
        ws = await store.create_workspace(f"ws-{uuid.uuid4().hex[:8]}")
        human, human_token = await store.create_account(ws.workspace_id, "ada", AccountKind.HUMAN)
        agent, agent_token = await store.create_account(
            ws.workspace_id, "scout", AccountKind.AGENT, owner_id=human.account_id
        )
        other, other_token = await store.create_account(ws.workspace_id, "grace", AccountKind.HUMAN)
        h = Actor(ws.workspace_id, human.account_id, AccountKind.HUMAN, hash_token(human_token))
        a = Actor(ws.workspace_id, agent.account_id, AccountKind.AGENT, hash_token(agent_token))
        o = Actor(ws.workspace_id, other.account_id, AccountKind.HUMAN, hash_token(other_token))
        channel = await store.create_channel(h, "general", "", [a.account_id])
        return cls(
            store,
            ws.workspace_id,
            h,
            a,
            o,
            channel,
            {h.account_id: human_token, a.account_id: agent_token, o.account_id: other_token},
        )

    async def add_account(self, handle: str, kind: AccountKind = AccountKind.HUMAN) -> Actor:
        owner = self.human.account_id if kind is AccountKind.AGENT else None
        account, token = await self.store.create_account(self.workspace_id, handle, kind, owner)
        self.tokens[account.account_id] = token
        return Actor(self.workspace_id, account.account_id, kind, hash_token(token))

    async def add_subagent(self, handle: str, parent: Actor) -> Actor:
        """An agent under `parent` (of the same owner), with its own token."""
        account, issued = await self.store.admin.create_account(
            Operator(self.workspace_id), handle, AccountKind.AGENT, parent_id=parent.account_id
        )
        self.tokens[account.account_id] = issued.secret
        return Actor(
            self.workspace_id, account.account_id, AccountKind.AGENT, hash_token(issued.secret)
        )

    async def reparent(self, agent: Actor, parent: Actor | None) -> None:
        await self.store.admin.reparent_agent(
            Operator(self.workspace_id), agent.account_id, parent.account_id if parent else None
        )

    async def add_pair(self) -> World:
        """Another person, an agent of theirs and a channel of the two, in this
        workspace."""
        tag = uuid.uuid4().hex[:6]
        human = await self.add_account(f"h-{tag}")
        agent = await self.add_account(f"a-{tag}", AccountKind.AGENT)
        channel = await self.store.create_channel(human, f"c-{tag}", "", [agent.account_id])
        return World(
            self.store, self.workspace_id, human, agent, self.other_human, channel, self.tokens
        )

    async def post_ask(
        self, author: Actor | None = None, *asks: Ask, channel: Channel | None = None
    ) -> Message:
        return await self.store.append_message(
            author or self.agent,
            (channel or self.channel).channel_id,
            list(asks) or [two_question_ask()],
        )

    async def post_text(self, author: Actor, text: str) -> Message:
        return await self.store.append_message(author, self.channel.channel_id, [TextBlock(text)])


def two_question_ask() -> Ask:
    """One single-select question and one multi-select question."""
    return Ask(
        questions=(
            AskQuestion(
                question_id="db",
                question="Which database?",
                header="Storage",
                options=(AskOption("pg", "PostgreSQL"), AskOption("my", "MySQL")),
                recommended=0,
            ),
            AskQuestion(
                question_id="langs",
                question="Which languages?",
                options=(AskOption("py", "Python"), AskOption("go", "Go"), AskOption("ts", "TS")),
                allow_multiple=True,
            ),
        )
    )
