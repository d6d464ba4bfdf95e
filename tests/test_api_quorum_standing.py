"""Quorum asks and standing answers over gRPC, Connect binary and Connect
JSON: posting a quorum, votes and the ending on the wire, the history's
kinds, making a standing answer with RespondToAsk, listing and revoking
them, an admin's listing, and what a client gets past each bound."""

from __future__ import annotations

import datetime
import pathlib
from collections.abc import Sequence

import pytest
from google.protobuf import duration_pb2

from compass.v1 import admin_pb2 as ad
from compass.v1 import comms_pb2 as pb
from compass_server.store.types import Actor
from tests.conftest import running_server
from tests.servers import Client, GrpcClient
from tests.test_api_ask_endings import read_ask, surface_of
from tests.test_api_comms import GOOD, ask_pb, expect, tok
from tests.test_quorum_asks import people
from tests.world import World


async def post_ask(
    client: Client,
    w: World,
    named: Sequence[Actor] = (),
    k: int = 0,
    against: bool = False,
    header: str = "",
) -> pb.Ask:
    """The agent posts ask_pb(), naming `named` with quorum `k`; `header`
    changes its first question."""
    wire = ask_pb()
    if header:
        wire.questions[0].header = header
    wire.answerer_account_ids.extend(str(p.account_id) for p in named)
    wire.quorum = k
    wire.declines_count_against_quorum = against
    res = await client.call(
        "PostMessage",
        pb.PostMessageRequest(
            channel_id=str(w.channel.channel_id), blocks=[pb.MessageBlock(ask=wire)]
        ),
        tok(w, w.agent),
    )
    return res.message.blocks[0].ask  # type: ignore[no-any-return]


async def respond(
    client: Client,
    w: World,
    who: Actor,
    ask_id: str,
    standing: pb.StandingAnswerTerms | None = None,
) -> pb.RespondToAskResponse:
    req = pb.RespondToAskRequest(ask_id=ask_id, answers=GOOD)
    if standing is not None:
        req.standing.CopyFrom(standing)
    res: pb.RespondToAskResponse = await client.call("RespondToAsk", req, tok(w, who))
    return res


def lasting(delta: datetime.timedelta, subagents: bool = False) -> pb.StandingAnswerTerms:
    d = duration_pb2.Duration()
    d.FromTimedelta(delta)
    return pb.StandingAnswerTerms(duration=d, include_subagents=subagents)


HOUR = lasting(datetime.timedelta(hours=1))


async def test_a_quorum_ask_on_the_wire(client: Client, api_world: World) -> None:
    w = api_world
    ada, grace, cy = await people(w, 3)
    ask = await post_quorum_of(client, w, [ada, grace, cy])
    assert ask.quorum == 2 and not ask.declines_count_against_quorum
    assert list(ask.answerer_handles)[:2] == ["ada", "grace"]

    first = await respond(client, w, grace, ask.ask_id)
    assert not first.HasField("answer_message")
    (vote,) = first.ask_message.blocks[0].ask.quorum_votes
    assert (vote.account_id, vote.handle, vote.kind) == (
        str(grace.account_id),
        "grace",
        pb.QUORUM_VOTE_KIND_ANSWER,
    )
    assert vote.surface == surface_of(client) and vote.HasField("at")
    assert [(a.question_id, list(a.chosen_option_ids), a.custom_text) for a in vote.answers] == [
        (a.question_id, list(a.chosen_option_ids), a.custom_text) for a in GOOD
    ]
    assert not first.ask_message.blocks[0].ask.HasField("ending")
    # Everyone who reads the ask sees the vote; grace may answer no more.
    assert len((await read_ask(client, w, ask.ask_id)).quorum_votes) == 1
    record = await client.call(
        "GetAskHistory", pb.GetAskHistoryRequest(ask_id=ask.ask_id), tok(w, grace)
    )
    assert [e.kind for e in record.entries] == [
        pb.ASK_HISTORY_KIND_POSTED,
        pb.ASK_HISTORY_KIND_QUORUM_ANSWER,
    ]
    assert not record.caller_may_answer
    again = await expect("already_exists", respond(client, w, grace, ask.ask_id))
    assert "you already answered" in again.message

    last = await respond(client, w, cy, ask.ask_id)
    ended = last.ask_message.blocks[0].ask
    assert ended.answered and ended.ending.kind == pb.ASK_ENDING_KIND_ANSWERED
    assert ended.ending.actor_account_id == str(cy.account_id)
    assert [v.account_id for v in ended.quorum_votes] == [str(grace.account_id), str(cy.account_id)]
    block = last.answer_message.blocks[0].ask_answer
    assert [v.account_id for v in block.quorum_votes] == [str(grace.account_id), str(cy.account_id)]
    late = await expect("already_exists", respond(client, w, ada, ask.ask_id))
    assert "already answered" in late.message
    # The ending's entry carries its receipt; a vote's, none.
    record = await client.call(
        "GetAskHistory", pb.GetAskHistoryRequest(ask_id=ask.ask_id), tok(w, grace)
    )
    assert ended.ending.receipt
    assert [(e.kind, e.receipt) for e in record.entries] == [
        (pb.ASK_HISTORY_KIND_POSTED, ""),
        (pb.ASK_HISTORY_KIND_QUORUM_ANSWER, ""),
        (pb.ASK_HISTORY_KIND_ANSWERED, ended.ending.receipt),
    ]


async def post_quorum_of(client: Client, w: World, named: list[Actor]) -> pb.Ask:
    return await post_ask(client, w, named, 2)


async def test_a_decline_counted_against_the_quorum_on_the_wire(
    client: Client, api_world: World
) -> None:
    w = api_world
    ada, grace, cy = await people(w, 3)
    ask = await post_ask(client, w, [ada, grace, cy], 2, against=True)
    assert ask.declines_count_against_quorum
    res = await client.call(
        "DeclineAsk", pb.DeclineAskRequest(ask_id=ask.ask_id, reason="not me"), tok(w, ada)
    )
    still = res.ask_message.blocks[0].ask
    assert not still.HasField("ending")
    assert [(v.kind, v.reason) for v in still.quorum_votes] == [
        (pb.QUORUM_VOTE_KIND_DECLINE, "not me")
    ]
    res = await client.call("DeclineAsk", pb.DeclineAskRequest(ask_id=ask.ask_id), tok(w, cy))
    assert res.ask_message.blocks[0].ask.ending.kind == pb.ASK_ENDING_KIND_DECLINED
    record = await client.call(
        "GetAskHistory", pb.GetAskHistoryRequest(ask_id=ask.ask_id), tok(w, grace)
    )
    assert [e.kind for e in record.entries] == [
        pb.ASK_HISTORY_KIND_POSTED,
        pb.ASK_HISTORY_KIND_QUORUM_DECLINE,
        pb.ASK_HISTORY_KIND_DECLINED,
    ]


@pytest.mark.parametrize(("named", "k", "against"), [(2, 3, False), (0, 1, False), (2, 0, True)])
async def test_a_quorum_the_ask_cant_have_is_invalid_argument(
    client: Client, api_world: World, named: int, k: int, against: bool
) -> None:
    w = api_world
    two = await people(w, 2)
    refused = await expect("invalid_argument", post_ask(client, w, two[:named], k, against=against))
    assert "quorum" in refused.message


async def test_a_standing_answer_made_listed_used_and_revoked(
    client: Client, api_world: World
) -> None:
    w = api_world
    first = await post_ask(client, w)
    made = await respond(client, w, w.human, first.ask_id, HOUR)
    rule = made.standing_answer
    assert made.HasField("answer_message")
    assert (rule.account_id, rule.handle) == (str(w.human.account_id), "ada")
    assert (rule.agent_account_id, rule.agent_handle) == (str(w.agent.account_id), "scout")
    assert rule.made_from_ask_id == first.ask_id and not rule.include_subagents
    span = rule.expires_at.ToDatetime() - rule.created_at.ToDatetime()
    assert span == datetime.timedelta(hours=1)
    assert [q.chosen_option_ids for q in rule.questions] == [g.chosen_option_ids for g in GOOD]

    # The next such ask is answered at its post; PostMessage's answer says so.
    second = await post_ask(client, w)
    assert second.answered
    assert second.ending.surface == pb.ASK_SURFACE_STANDING_ANSWER
    assert second.ending.standing_answer_id == rule.standing_answer_id
    assert second.ending.actor_handle == "ada"
    record = await client.call(
        "GetAskHistory", pb.GetAskHistoryRequest(ask_id=second.ask_id), tok(w, w.human)
    )
    assert record.entries[-1].surface == pb.ASK_SURFACE_STANDING_ANSWER
    assert record.entries[-1].standing_answer_id == rule.standing_answer_id

    listed = await client.call(
        "ListStandingAnswers", pb.ListStandingAnswersRequest(), tok(w, w.human)
    )
    assert [(s.standing_answer_id, s.asks_answered) for s in listed.standing_answers] == [
        (rule.standing_answer_id, 1)
    ]
    assert not (
        await client.call(
            "ListStandingAnswers", pb.ListStandingAnswersRequest(), tok(w, w.other_human)
        )
    ).standing_answers
    await expect(
        "not_found",
        client.call(
            "RevokeStandingAnswer",
            pb.RevokeStandingAnswerRequest(standing_answer_id=rule.standing_answer_id),
            tok(w, w.other_human),
        ),
    )
    revoked = await client.call(
        "RevokeStandingAnswer",
        pb.RevokeStandingAnswerRequest(standing_answer_id=rule.standing_answer_id),
        tok(w, w.human),
    )
    assert revoked.standing_answer.HasField("revoked_at")
    assert not (await post_ask(client, w)).answered
    assert not (
        await client.call("ListStandingAnswers", pb.ListStandingAnswersRequest(), tok(w, w.human))
    ).standing_answers
    ended = await client.call(
        "ListStandingAnswers", pb.ListStandingAnswersRequest(include_ended=True), tok(w, w.human)
    )
    assert [s.standing_answer_id for s in ended.standing_answers] == [rule.standing_answer_id]

    workspace = await client.call(
        "ListWorkspaceStandingAnswers",
        ad.ListWorkspaceStandingAnswersRequest(include_ended=True),
        tok(w, w.human),
    )
    assert [s.standing_answer_id for s in workspace.standing_answers] == [rule.standing_answer_id]
    await expect(
        "permission_denied",
        client.call(
            "ListWorkspaceStandingAnswers",
            ad.ListWorkspaceStandingAnswersRequest(),
            tok(w, w.other_human),
        ),
    )


@pytest.mark.parametrize("delta", [datetime.timedelta(seconds=30), datetime.timedelta(days=31)])
async def test_a_standing_answer_outside_its_bounds_is_invalid_argument(
    client: Client, api_world: World, delta: datetime.timedelta
) -> None:
    w = api_world
    ask = await post_ask(client, w)
    refused = await expect(
        "invalid_argument", respond(client, w, w.human, ask.ask_id, lasting(delta))
    )
    assert refused.message == "a standing answer stands 1 minute to 30 days"
    assert not (await read_ask(client, w, ask.ask_id)).answered


async def test_past_the_most_standing_answers_a_client_gets_resource_exhausted(
    database_url: str, tmp_path: pathlib.Path
) -> None:
    async with running_server(
        database_url, tmp_path, standing_answers_per_person=1, standing_answer_max_seconds=7200
    ) as srv:
        client = GrpcClient(srv.grpc_port)
        try:
            w = await World.create(srv.store)
            await respond(client, w, w.human, (await post_ask(client, w)).ask_id, HOUR)
            ask = await post_ask(client, w, header="Another")
            refused = await expect(
                "resource_exhausted", respond(client, w, w.human, ask.ask_id, HOUR)
            )
            assert "revoke one first" in refused.message
            too_long = await expect(
                "invalid_argument",
                respond(client, w, w.human, ask.ask_id, lasting(datetime.timedelta(hours=3))),
            )
            assert too_long.message == "a standing answer stands 1 minute to 2 hours"
            assert not (await read_ask(client, w, ask.ask_id)).answered
        finally:
            await client.close()
