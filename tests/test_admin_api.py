"""AdminService and IdentityService over gRPC, Connect binary and Connect JSON:
who may administer a workspace, the token lifecycle, roles, and streams that
end when their token stops signing in."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from typing import Any

import psycopg
from google.protobuf import duration_pb2

from compass.v1 import admin_pb2 as ad
from compass.v1 import comms_pb2 as pb
from tests.servers import CallError, Client
from tests.test_api_comms import expect
from tests.world import World


def tok(w: World, who: Any) -> str:
    return w.tokens[who.account_id]


def seconds(n: float) -> duration_pb2.Duration:
    out = duration_pb2.Duration()
    out.FromTimedelta(datetime.timedelta(seconds=n))
    return out


async def token_id_of(client: Client, token: str) -> str:
    me = await client.call("WhoAmI", ad.WhoAmIRequest(), token)
    return me.token_info.token_id  # type: ignore[no-any-return]


async def runner(client: Client, w: World, *agents: Any) -> ad.CreateRunnerResponse:
    made = await client.call(
        "CreateRunner", ad.CreateRunnerRequest(name=f"r-{uuid.uuid4().hex[:6]}"), tok(w, w.human)
    )
    for agent in agents:
        await client.call(
            "AssignAgent",
            ad.AssignAgentRequest(
                runner_id=made.runner.runner_id, agent_account_id=str(agent.account_id)
            ),
            tok(w, w.human),
        )
    return made  # type: ignore[no-any-return]


async def ended(stream: Any, wait: float = 10.0) -> CallError:
    """Reads the stream until it fails; the failure as the client saw it."""

    async def drain() -> CallError:
        try:
            async for _ in stream:
                pass
        except CallError as exc:
            return exc
        raise AssertionError("the stream ended without an error")

    return await asyncio.wait_for(drain(), wait)


# --- who am I --------------------------------------------------------------------


async def test_who_am_i_names_the_account_or_runner_and_the_token(
    client: Client, api_world: World
) -> None:
    w = api_world
    me = await client.call("WhoAmI", ad.WhoAmIRequest(), tok(w, w.human))
    assert me.workspace_id == str(w.workspace_id)
    assert me.workspace_name.startswith("ws-")
    assert me.WhichOneof("principal") == "account"
    assert me.account.account_id == str(w.human.account_id)
    assert me.account.handle == "ada"
    assert me.account.kind == ad.PRINCIPAL_KIND_HUMAN
    # The first human of a workspace is its admin; the next is a member.
    assert me.account.role == ad.WORKSPACE_ROLE_ADMIN
    assert me.token_info.active and me.token_info.account_id == str(w.human.account_id)
    assert me.token_info.HasField("last_used_at") and not me.token_info.HasField("expires_at")

    grace = await client.call("WhoAmI", ad.WhoAmIRequest(), tok(w, w.other_human))
    assert grace.account.role == ad.WORKSPACE_ROLE_MEMBER
    agent = await client.call("WhoAmI", ad.WhoAmIRequest(), tok(w, w.agent))
    assert agent.account.kind == ad.PRINCIPAL_KIND_AGENT
    assert agent.account.owner_account_id == str(w.human.account_id)

    made = await runner(client, w, w.agent)
    as_runner = await client.call("WhoAmI", ad.WhoAmIRequest(), made.token)
    assert as_runner.WhichOneof("principal") == "runner"
    assert as_runner.runner.runner_id == made.runner.runner_id
    assert list(as_runner.runner.agent_account_ids) == [str(w.agent.account_id)]
    assert as_runner.token_info.kind == ad.PRINCIPAL_KIND_RUNNER

    await expect("unauthenticated", client.call("WhoAmI", ad.WhoAmIRequest(), "nope"))
    await expect("unauthenticated", client.call("WhoAmI", ad.WhoAmIRequest(), None))


# --- who may administer ---------------------------------------------------------------


async def test_members_agents_and_runners_are_refused_and_other_workspaces_are_invisible(
    client: Client, api_world: World, server: Any
) -> None:
    w = api_world
    made = await runner(client, w)
    ada_token = await token_id_of(client, tok(w, w.human))
    calls: list[tuple[str, Any]] = [
        ("ListAccounts", ad.ListAccountsRequest()),
        ("ListRunners", ad.ListRunnersRequest()),
        ("ListTokens", ad.ListTokensRequest()),
        ("CreateAccount", ad.CreateAccountRequest(handle="x", kind=ad.PRINCIPAL_KIND_HUMAN)),
        ("CreateRunner", ad.CreateRunnerRequest(name="x")),
        ("CreateToken", ad.CreateTokenRequest(account_id=str(w.other_human.account_id))),
        ("RevokeToken", ad.RevokeTokenRequest(token_id=ada_token)),
        ("RotateToken", ad.RotateTokenRequest(token_id=ada_token)),
        (
            "SetAccountRole",
            ad.SetAccountRoleRequest(
                account_id=str(w.other_human.account_id), role=ad.WORKSPACE_ROLE_ADMIN
            ),
        ),
        (
            "AssignAgent",
            ad.AssignAgentRequest(
                runner_id=made.runner.runner_id, agent_account_id=str(w.agent.account_id)
            ),
        ),
        (
            "UnassignAgent",
            ad.UnassignAgentRequest(
                runner_id=made.runner.runner_id, agent_account_id=str(w.agent.account_id)
            ),
        ),
        ("ReparentAgent", ad.ReparentAgentRequest(agent_account_id=str(w.agent.account_id))),
    ]
    for method, request in calls:
        for token in (tok(w, w.other_human), tok(w, w.agent), made.token):
            await expect("permission_denied", client.call(method, request, token))

    # The admin of another workspace sees none of this one.
    other = await World.create(server.store)
    admin = tok(other, other.human)
    for method, request in calls[5:]:
        await expect("not_found", client.call(method, request, admin))
    listed = await client.call("ListAccounts", ad.ListAccountsRequest(), admin)
    assert {a.handle for a in listed.accounts} == {"ada", "scout", "grace"}
    assert str(w.human.account_id) not in {a.account_id for a in listed.accounts}
    # Nothing changed in this workspace.
    me = await client.call("WhoAmI", ad.WhoAmIRequest(), tok(w, w.human))
    assert me.token_info.active
    grace = await client.call("WhoAmI", ad.WhoAmIRequest(), tok(w, w.other_human))
    assert grace.account.role == ad.WORKSPACE_ROLE_MEMBER


async def test_roles_an_admin_names_another_and_the_last_admin_stays(
    client: Client, api_world: World
) -> None:
    w = api_world
    ada, grace = tok(w, w.human), tok(w, w.other_human)

    def role(account: Any, value: int) -> ad.SetAccountRoleRequest:
        return ad.SetAccountRoleRequest(account_id=str(account.account_id), role=value)

    await expect(
        "failed_precondition",
        client.call("SetAccountRole", role(w.human, ad.WORKSPACE_ROLE_MEMBER), ada),
    )
    await expect(
        "invalid_argument",
        client.call("SetAccountRole", role(w.agent, ad.WORKSPACE_ROLE_ADMIN), ada),
    )
    await expect(
        "invalid_argument",
        client.call("SetAccountRole", role(w.other_human, ad.WORKSPACE_ROLE_UNSPECIFIED), ada),
    )
    made = await client.call("SetAccountRole", role(w.other_human, ad.WORKSPACE_ROLE_ADMIN), ada)
    assert made.account.role == ad.WORKSPACE_ROLE_ADMIN
    # grace administers now, and may make ada a member; then grace is the last.
    demoted = await client.call("SetAccountRole", role(w.human, ad.WORKSPACE_ROLE_MEMBER), grace)
    assert demoted.account.role == ad.WORKSPACE_ROLE_MEMBER
    await expect("permission_denied", client.call("ListAccounts", ad.ListAccountsRequest(), ada))
    await expect(
        "failed_precondition",
        client.call("SetAccountRole", role(w.other_human, ad.WORKSPACE_ROLE_MEMBER), grace),
    )
    listed = await client.call("ListAccounts", ad.ListAccountsRequest(), grace)
    assert [(a.handle, a.role) for a in listed.accounts] == [
        ("ada", ad.WORKSPACE_ROLE_MEMBER),
        ("scout", ad.WORKSPACE_ROLE_MEMBER),
        ("grace", ad.WORKSPACE_ROLE_ADMIN),
    ]


async def test_an_admin_creates_people_agents_and_runners_and_assigns_them(
    client: Client, api_world: World
) -> None:
    w = api_world
    ada = tok(w, w.human)
    tag = uuid.uuid4().hex[:6]
    person = await client.call(
        "CreateAccount",
        ad.CreateAccountRequest(
            handle=f"lin-{tag}",
            kind=ad.PRINCIPAL_KIND_HUMAN,
            role=ad.WORKSPACE_ROLE_ADMIN,
            token_label="laptop",
            token_expires_in=seconds(3600),
        ),
        ada,
    )
    assert person.account.role == ad.WORKSPACE_ROLE_ADMIN
    assert person.token.startswith("cpa_") and person.token_info.label == "laptop"
    assert person.token_info.HasField("expires_at")
    agent = await client.call(
        "CreateAccount",
        ad.CreateAccountRequest(
            handle=f"bot-{tag}",
            kind=ad.PRINCIPAL_KIND_AGENT,
            owner_account_id=person.account.account_id,
        ),
        person.token,
    )
    assert agent.account.role == ad.WORKSPACE_ROLE_MEMBER
    await expect(
        "invalid_argument",
        client.call(
            "CreateAccount",
            ad.CreateAccountRequest(
                handle=f"bot2-{tag}",
                kind=ad.PRINCIPAL_KIND_AGENT,
                owner_account_id=person.account.account_id,
                role=ad.WORKSPACE_ROLE_ADMIN,
            ),
            ada,
        ),
    )
    await expect(
        "already_exists",
        client.call(
            "CreateAccount",
            ad.CreateAccountRequest(handle=f"lin-{tag}", kind=ad.PRINCIPAL_KIND_HUMAN),
            ada,
        ),
    )
    made = await client.call("CreateRunner", ad.CreateRunnerRequest(name="laptop"), ada)
    assert made.token.startswith("cpr_") and made.token_info.runner_id == made.runner.runner_id
    assign = ad.AssignAgentRequest(
        runner_id=made.runner.runner_id, agent_account_id=agent.account.account_id
    )
    for _ in range(2):
        assigned = await client.call("AssignAgent", assign, ada)
        assert list(assigned.runner.agent_account_ids) == [agent.account.account_id]
    await expect(
        "not_found",
        client.call(
            "AssignAgent",
            ad.AssignAgentRequest(
                runner_id=made.runner.runner_id, agent_account_id=person.account.account_id
            ),
            ada,
        ),
    )
    runners = await client.call("ListRunners", ad.ListRunnersRequest(), ada)
    (listed,) = [r for r in runners.runners if r.runner_id == made.runner.runner_id]
    assert list(listed.agent_account_ids) == [agent.account.account_id]
    unassign = ad.UnassignAgentRequest(
        runner_id=made.runner.runner_id, agent_account_id=agent.account.account_id
    )
    gone = await client.call("UnassignAgent", unassign, ada)
    assert list(gone.runner.agent_account_ids) == [] and gone.sessions_unbound == 0
    again = await client.call("UnassignAgent", unassign, ada)
    assert again.sessions_unbound == 0


# --- the token lifecycle ------------------------------------------------------------


async def test_create_list_and_revoke_a_token(
    client: Client, api_world: World, database_url: str
) -> None:
    w = api_world
    ada = tok(w, w.human)
    grace = str(w.other_human.account_id)
    made = await client.call(
        "CreateToken",
        ad.CreateTokenRequest(account_id=grace, label="ci", expires_in=seconds(3600)),
        ada,
    )
    assert made.token.startswith("cpa_") and made.token_info.label == "ci"
    me = await client.call("WhoAmI", ad.WhoAmIRequest(), made.token)
    assert me.account.account_id == grace and me.token_info.token_id == made.token_info.token_id
    left = me.token_info.expires_at.ToDatetime(datetime.UTC) - datetime.datetime.now(datetime.UTC)
    assert datetime.timedelta(minutes=59) < left <= datetime.timedelta(hours=1)

    listed = await client.call("ListTokens", ad.ListTokensRequest(account_id=grace), ada)
    assert [t.label for t in listed.tokens] == ["ci", ""]
    assert all(t.active for t in listed.tokens)
    # No secret leaves the server after it was shown once, nor is it stored.
    assert made.token.encode() not in listed.SerializeToString()
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        stored = await (await conn.execute("SELECT token_hash, label FROM credentials")).fetchall()
    assert all(made.token.encode() not in bytes(h) for h, _ in stored)

    revoked = await client.call(
        "RevokeToken", ad.RevokeTokenRequest(token_id=made.token_info.token_id), ada
    )
    assert revoked.token_info.HasField("revoked_at") and not revoked.token_info.active
    err = await expect("unauthenticated", client.call("WhoAmI", ad.WhoAmIRequest(), made.token))
    assert "revoked" in err.message
    # The person's other token still works.
    await client.call("WhoAmI", ad.WhoAmIRequest(), tok(w, w.other_human))
    again = await client.call(
        "RevokeToken", ad.RevokeTokenRequest(token_id=made.token_info.token_id), ada
    )
    assert again.token_info.revoked_at == revoked.token_info.revoked_at

    active = await client.call("ListTokens", ad.ListTokensRequest(account_id=grace), ada)
    assert [t.label for t in active.tokens] == [""]
    every = await client.call(
        "ListTokens", ad.ListTokensRequest(account_id=grace, include_inactive=True), ada
    )
    assert [(t.label, t.active) for t in every.tokens] == [("ci", False), ("", True)]


async def test_rotate_revokes_the_old_token_at_once_or_after_a_grace(
    client: Client, api_world: World
) -> None:
    w = api_world
    ada = tok(w, w.human)
    made = await client.call(
        "CreateToken",
        ad.CreateTokenRequest(
            account_id=str(w.other_human.account_id), label="deploy", expires_in=seconds(7200)
        ),
        ada,
    )
    old_id = made.token_info.token_id
    rotated = await client.call("RotateToken", ad.RotateTokenRequest(token_id=old_id), ada)
    assert rotated.token != made.token and rotated.token_info.token_id != old_id
    assert rotated.token_info.label == "deploy"
    assert rotated.token_info.account_id == str(w.other_human.account_id)
    # The new one lives as long as the old one did.
    lifetime = (
        rotated.token_info.expires_at.ToDatetime() - rotated.token_info.created_at.ToDatetime()
    )
    assert abs(lifetime - datetime.timedelta(hours=2)) < datetime.timedelta(seconds=1)
    assert rotated.old_token_info.replaced_by_token_id == rotated.token_info.token_id
    assert not rotated.old_token_info.active and rotated.old_token_info.HasField("revoked_at")
    await expect("unauthenticated", client.call("WhoAmI", ad.WhoAmIRequest(), made.token))
    me = await client.call("WhoAmI", ad.WhoAmIRequest(), rotated.token)
    assert me.account.account_id == str(w.other_human.account_id)
    await expect(
        "failed_precondition",
        client.call("RotateToken", ad.RotateTokenRequest(token_id=old_id), ada),
    )

    # With a grace the old token keeps working until it ends, then expires.
    graced = await client.call(
        "RotateToken",
        ad.RotateTokenRequest(
            token_id=rotated.token_info.token_id, grace=seconds(60), expires_in=seconds(600)
        ),
        ada,
    )
    assert graced.old_token_info.active and not graced.old_token_info.HasField("revoked_at")
    ends = graced.old_token_info.expires_at.ToDatetime(datetime.UTC)
    assert ends - datetime.datetime.now(datetime.UTC) <= datetime.timedelta(seconds=60)
    await client.call("WhoAmI", ad.WhoAmIRequest(), rotated.token)
    await client.call("WhoAmI", ad.WhoAmIRequest(), graced.token)
    new_life = graced.token_info.expires_at.ToDatetime() - graced.token_info.created_at.ToDatetime()
    assert abs(new_life - datetime.timedelta(minutes=10)) < datetime.timedelta(seconds=1)


async def test_an_expired_token_is_refused_and_its_stream_ends(
    client: Client, api_world: World
) -> None:
    w = api_world
    made = await client.call(
        "CreateToken",
        ad.CreateTokenRequest(account_id=str(w.other_human.account_id), expires_in=seconds(1)),
        tok(w, w.human),
    )
    stream = client.stream("Subscribe", pb.SubscribeRequest(), made.token)
    ready = await asyncio.wait_for(anext(stream), 10)
    assert ready.WhichOneof("kind") == "ready"
    err = await ended(stream)
    assert err.code == "unauthenticated" and "expired" in err.message, err
    err = await expect("unauthenticated", client.call("WhoAmI", ad.WhoAmIRequest(), made.token))
    assert "expired" in err.message
    listed = await client.call(
        "ListTokens",
        ad.ListTokensRequest(account_id=str(w.other_human.account_id), include_inactive=True),
        tok(w, w.human),
    )
    (gone,) = [t for t in listed.tokens if t.token_id == made.token_info.token_id]
    assert not gone.active and not gone.HasField("revoked_at")


async def test_a_revoked_tokens_subscribe_stream_ends_with_unauthenticated(
    client: Client, api_world: World
) -> None:
    w = api_world
    made = await client.call(
        "CreateToken",
        ad.CreateTokenRequest(account_id=str(w.other_human.account_id)),
        tok(w, w.human),
    )
    stream = client.stream("Subscribe", pb.SubscribeRequest(), made.token)
    assert (await asyncio.wait_for(anext(stream), 10)).WhichOneof("kind") == "ready"
    # A stream of another token of the same person stays up.
    other = client.stream("Subscribe", pb.SubscribeRequest(), tok(w, w.other_human))
    assert (await asyncio.wait_for(anext(other), 10)).WhichOneof("kind") == "ready"
    await client.call(
        "RevokeToken", ad.RevokeTokenRequest(token_id=made.token_info.token_id), tok(w, w.human)
    )
    err = await ended(stream, 5)
    assert err.code == "unauthenticated" and "revoked" in err.message, err
    await client.call(
        "PostMessage",
        pb.PostMessageRequest(
            channel_id=str(w.channel.channel_id),
            blocks=[pb.MessageBlock(text=pb.TextBlock(text="still here"))],
        ),
        tok(w, w.human),
    )
    await client.call(
        "AddChannelMember",
        pb.AddChannelMemberRequest(
            channel_id=str(w.channel.channel_id), account_id=str(w.other_human.account_id)
        ),
        tok(w, w.human),
    )
    heard = await asyncio.wait_for(anext(other), 10)
    assert heard.WhichOneof("kind") == "channel_changed"
    await other.aclose()  # type: ignore[attr-defined]


async def test_bad_input_is_invalid_argument_or_not_found(client: Client, api_world: World) -> None:
    w = api_world
    ada = tok(w, w.human)
    grace = str(w.other_human.account_id)
    for request in (
        ad.CreateTokenRequest(account_id=grace, label="a\x00b"),
        ad.CreateTokenRequest(account_id=grace, label="x" * 81),
        ad.CreateTokenRequest(account_id=grace, expires_in=seconds(0)),
        ad.CreateTokenRequest(account_id=grace, expires_in=seconds(-5)),
        ad.CreateTokenRequest(account_id=grace, expires_in=seconds(3651 * 86400)),
        ad.CreateTokenRequest(),
        ad.CreateTokenRequest(account_id=grace, runner_id=grace),
    ):
        await expect("invalid_argument", client.call("CreateToken", request, ada))
    for handle in ("", "a\x00b", "h" * 81):
        await expect(
            "invalid_argument",
            client.call(
                "CreateAccount",
                ad.CreateAccountRequest(handle=handle, kind=ad.PRINCIPAL_KIND_HUMAN),
                ada,
            ),
        )
    await expect(
        "invalid_argument",
        client.call("CreateAccount", ad.CreateAccountRequest(handle="nokind"), ada),
    )
    await expect("invalid_argument", client.call("RevokeToken", ad.RevokeTokenRequest(), ada))
    for token_id in ("not-a-uuid", str(uuid.uuid4())):
        await expect(
            "not_found", client.call("RevokeToken", ad.RevokeTokenRequest(token_id=token_id), ada)
        )
    own = await token_id_of(client, ada)
    for grace_period in (-1, 8 * 86400):
        await expect(
            "invalid_argument",
            client.call(
                "RotateToken",
                ad.RotateTokenRequest(token_id=own, grace=seconds(grace_period)),
                ada,
            ),
        )
    await expect(
        "invalid_argument",
        client.call("ListTokens", ad.ListTokensRequest(page_token="garbage!"), ada),
    )
    await expect(
        "invalid_argument", client.call("ListTokens", ad.ListTokensRequest(page_size=-1), ada)
    )


async def test_tokens_come_in_pages(client: Client, api_world: World) -> None:
    w = api_world
    ada = tok(w, w.human)
    grace = str(w.other_human.account_id)
    for i in range(4):
        await client.call(
            "CreateToken", ad.CreateTokenRequest(account_id=grace, label=f"t{i}"), ada
        )
    labels: list[str] = []
    page_token = ""
    while True:
        page = await client.call(
            "ListTokens",
            ad.ListTokensRequest(account_id=grace, page_size=2, page_token=page_token),
            ada,
        )
        assert len(page.tokens) <= 2
        labels.extend(t.label for t in page.tokens)
        page_token = page.next_page_token
        if not page_token:
            break
    assert labels == ["t3", "t2", "t1", "t0", ""]


async def test_an_admin_creates_a_subagent_and_moves_it(client: Client, api_world: World) -> None:
    w = api_world
    ada = tok(w, w.human)
    made = await client.call(
        "CreateAccount",
        ad.CreateAccountRequest(
            handle="planner",
            kind=ad.PRINCIPAL_KIND_AGENT,
            parent_account_id=str(w.agent.account_id),
        ),
        ada,
    )
    planner = made.account
    # The owner is the parent's when none is named.
    assert (planner.parent_account_id, planner.owner_account_id) == (
        str(w.agent.account_id),
        str(w.human.account_id),
    )
    listed = await client.call("ListAccounts", ad.ListAccountsRequest(), ada)
    parents = {a.handle: a.parent_account_id for a in listed.accounts}
    assert parents == {"ada": "", "scout": "", "grace": "", "planner": str(w.agent.account_id)}
    got = await client.call(
        "GetAccounts", pb.GetAccountsRequest(account_ids=[planner.account_id]), ada
    )
    assert got.accounts[0].parent_account_id == str(w.agent.account_id)
    # Its own token reaches its parent's channel.
    channels = await client.call("ListChannels", pb.ListChannelsRequest(), made.token)
    assert [c.channel_id for c in channels.channels] == [str(w.channel.channel_id)]

    moved = await client.call(
        "ReparentAgent", ad.ReparentAgentRequest(agent_account_id=planner.account_id), ada
    )
    assert moved.account.parent_account_id == ""
    channels = await client.call("ListChannels", pb.ListChannelsRequest(), made.token)
    assert list(channels.channels) == []
    await expect(
        "not_found",
        client.call(
            "UpdateTopic",
            pb.UpdateTopicRequest(channel_id=str(w.channel.channel_id), topic="moved"),
            made.token,
        ),
    )
    back = ad.ReparentAgentRequest(
        agent_account_id=planner.account_id, parent_account_id=str(w.agent.account_id)
    )
    assert (await client.call("ReparentAgent", back, ada)).account.parent_account_id == str(
        w.agent.account_id
    )

    # A cycle, another owner's agent, a person, an unknown id.
    rover = await client.call(
        "CreateAccount",
        ad.CreateAccountRequest(
            handle="rover",
            kind=ad.PRINCIPAL_KIND_AGENT,
            owner_account_id=str(w.other_human.account_id),
        ),
        ada,
    )
    for parent, code in (
        (planner.account_id, "failed_precondition"),
        (rover.account.account_id, "invalid_argument"),
        (str(w.human.account_id), "not_found"),
        (str(uuid.uuid4()), "not_found"),
    ):
        request = ad.ReparentAgentRequest(
            agent_account_id=str(w.agent.account_id), parent_account_id=parent
        )
        await expect(code, client.call("ReparentAgent", request, ada))
    await expect(
        "invalid_argument",
        client.call(
            "CreateAccount",
            ad.CreateAccountRequest(
                handle="person", kind=ad.PRINCIPAL_KIND_HUMAN, parent_account_id=planner.account_id
            ),
            ada,
        ),
    )
