"""Pictures an agent attaches to its inbox posts and replies: files of its
own sandbox, checked before anything is sent (inside the sandbox, no
symlink out of it, a regular file, a picture by its bytes, within the size
limits), and each path the text names rewritten to the picture's address."""

from __future__ import annotations

import base64
import os
import pathlib
import struct
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compass.v1 import agent_gateway_pb2 as gw
from compass_agentkit import pictures
from compass_agentkit.pictures import Picture, Sandbox, attach
from compass_agentkit.relay import Relay
from compass_agentkit.schema import Refused
from compass_agentkit.tools import Tool, ToolError, comms_tools
from tests.relay_client import runner_for
from tests.world import World


def png(width: int = 1, height: int = 1, pad: int = 0) -> bytes:
    """A real PNG, optionally padded with an ancillary chunk to a size."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    raw = b"".join(b"\x00" + b"\x00" * width for _ in range(height))
    parts = [chunk(b"IHDR", header), chunk(b"IDAT", zlib.compress(raw))]
    if pad:
        parts.append(chunk(b"tEXt", b"c\x00" + b"x" * pad))
    return b"\x89PNG\r\n\x1a\n" + b"".join(parts) + chunk(b"IEND", b"")


GIF = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 16
WEBP = b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"\x00" * 8


@pytest.fixture
def sandbox(tmp_path: pathlib.Path) -> Sandbox:
    root = tmp_path / "sandbox"
    (root / "shots").mkdir(parents=True)
    (root / "shots" / "login.png").write_bytes(png())
    (root / "chart.gif").write_bytes(GIF)
    return Sandbox(root)


def refusal(sandbox: Sandbox, *paths: str) -> tuple[str, str]:
    with pytest.raises(Refused) as refused:
        sandbox.read_all(list(paths))
    return refused.value.code, refused.value.message


# --- what a picture is ---------------------------------------------------------------------


def test_a_pictures_type_comes_from_its_bytes() -> None:
    for data, kind in (
        (png(), "image/png"),
        (GIF, "image/gif"),
        (b"GIF87a" + GIF[6:], "image/gif"),
        (JPEG, "image/jpeg"),
        (WEBP, "image/webp"),
        (b"RIFF\x00\x00\x00\x00WAVE", None),
        (b"%PDF-1.7", None),
        (b"", None),
    ):
        assert pictures.sniff(data) == kind, data
    assert {k for k in (pictures.sniff(d) for d in (png(), GIF, JPEG, WEBP)) if k} == pictures.TYPES


# --- reading from the sandbox --------------------------------------------------------------


def test_a_picture_is_read_by_its_path_in_the_sandbox(sandbox: Sandbox) -> None:
    login, chart = sandbox.read_all(["shots/login.png", str(sandbox.root / "chart.gif")])
    assert (login.name, login.content_type, login.data) == ("login.png", "image/png", png())
    assert (chart.name, chart.content_type) == ("chart.gif", "image/gif")
    assert login.address == "attachment:login.png"


def test_a_path_outside_the_sandbox_is_refused(sandbox: Sandbox, tmp_path: pathlib.Path) -> None:
    (tmp_path / "secret.png").write_bytes(png())
    for path in ("../secret.png", str(tmp_path / "secret.png"), "shots/../../secret.png", "/"):
        code, message = refusal(sandbox, path)
        assert code == "permission_denied", path
        assert "outside your sandbox" in message


def test_a_symlink_out_of_the_sandbox_is_refused(sandbox: Sandbox, tmp_path: pathlib.Path) -> None:
    (tmp_path / "secret.png").write_bytes(png())
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.png").write_bytes(png())
    os.symlink(tmp_path / "secret.png", sandbox.root / "innocent.png")
    os.symlink(tmp_path / "elsewhere", sandbox.root / "dir")
    assert refusal(sandbox, "innocent.png")[0] == "permission_denied"
    assert refusal(sandbox, "dir/x.png")[0] == "permission_denied"
    # A symlink that stays inside is only another name for a file there.
    os.symlink(sandbox.root / "shots" / "login.png", sandbox.root / "latest.png")
    [latest] = sandbox.read_all(["latest.png"])
    assert (latest.name, latest.data) == ("latest.png", png())


def test_what_is_not_a_readable_picture_is_refused(sandbox: Sandbox) -> None:
    root = sandbox.root
    (root / "notes.png").write_text("not a picture at all")
    (root / "empty.png").write_bytes(b"")
    os.mkfifo(root / "pipe.png")  # opening it for reading must not wait for a writer
    assert refusal(sandbox, "a\x00.png") == ("invalid_argument", "picture 'a\\x00.png' is no path")
    assert refusal(sandbox, "")[0] == "invalid_argument"
    assert refusal(sandbox, "missing.png") == (
        "not_found",
        "picture 'missing.png' is not a file in your sandbox",
    )
    assert refusal(sandbox, "shots") == ("invalid_argument", "picture 'shots' is not a file")
    assert refusal(sandbox, "pipe.png") == ("invalid_argument", "picture 'pipe.png' is not a file")
    for name in ("notes.png", "empty.png"):
        code, message = refusal(sandbox, name)
        assert code == "invalid_argument"
        assert message == f"picture {name!r} is not a PNG, JPEG, GIF or WebP image"


def test_a_picture_over_the_size_limit_is_refused_without_reading_it_all(
    sandbox: Sandbox,
) -> None:
    big = sandbox.root / "big.png"
    with big.open("wb") as f:
        f.write(png())
        f.truncate(pictures.MAX_PICTURE_BYTES + 1)  # sparse: nothing more is written
    code, message = refusal(sandbox, "big.png")
    assert code == "resource_exhausted"
    assert message == (
        f"picture 'big.png' is {pictures.MAX_PICTURE_BYTES + 1} bytes; the limit is "
        f"{pictures.MAX_PICTURE_BYTES}"
    )


def test_pictures_over_the_limit_of_one_call_are_refused(sandbox: Sandbox) -> None:
    half = pictures.MAX_PICTURE_BYTES_PER_CALL // 2
    (sandbox.root / "a.png").write_bytes(png(pad=half))
    (sandbox.root / "b.png").write_bytes(png(pad=half))
    assert len(sandbox.read_all(["a.png"])) == 1
    code, message = refusal(sandbox, "a.png", "b.png")
    assert code == "resource_exhausted"
    assert f"the limit is {pictures.MAX_PICTURE_BYTES_PER_CALL} bytes" in message


def test_names_are_plain_and_unique_within_a_message(sandbox: Sandbox) -> None:
    (sandbox.root / "other").mkdir()
    (sandbox.root / "other" / "login.png").write_bytes(png())
    (sandbox.root / "my shot (1).png").write_bytes(png())
    read = sandbox.read_all(["shots/login.png", "other/login.png", "my shot (1).png"])
    assert [p.name for p in read] == ["login.png", "login-2.png", "my-shot-1-.png"]


def test_a_sandbox_must_be_a_folder(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="not a folder"):
        Sandbox(tmp_path / "nope")
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="not a folder"):
        Sandbox(tmp_path / "file")


# --- the text names each picture by its address ----------------------------------------------


def _pic(sandbox: Sandbox, path: str) -> Picture:
    [picture] = sandbox.read_all([path])
    return picture


def test_a_path_in_the_text_becomes_the_pictures_address(sandbox: Sandbox) -> None:
    login = _pic(sandbox, "shots/login.png")
    absolute = str(sandbox.root / "shots" / "login.png")
    text = (
        f"The form breaks: shots/login.png. Same as ./shots/login.png and {absolute}, "
        f"and ![login](shots/login.png)."
    )
    assert attach(text, [login]) == (
        "The form breaks: attachment:login.png. Same as attachment:login.png and "
        "attachment:login.png, and ![login](attachment:login.png)."
    )


def test_only_whole_paths_outside_code_are_rewritten(sandbox: Sandbox) -> None:
    login = _pic(sandbox, "shots/login.png")
    text = (
        "`shots/login.png` stays, and so does\n```\ncp shots/login.png /tmp\n```\n"
        "but shots/login.png goes; shots/login.png.bak, oldshots/login.png, "
        "/other/shots/login.png and shots/login.pngx stay."
    )
    assert attach(text, [login]) == (
        "`shots/login.png` stays, and so does\n```\ncp shots/login.png /tmp\n```\n"
        "but attachment:login.png goes; shots/login.png.bak, oldshots/login.png, "
        "/other/shots/login.png and shots/login.pngx stay."
    )


def test_several_pictures_each_take_their_own_address(sandbox: Sandbox) -> None:
    (sandbox.root / "shots" / "login.png.png").write_bytes(png())
    read = sandbox.read_all(["shots/login.png", "shots/login.png.png", "chart.gif"])
    assert attach("shots/login.png.png then shots/login.png and chart.gif", read) == (
        "attachment:login.png.png then attachment:login.png and attachment:chart.gif"
    )
    assert attach("", read) == ""


@settings(max_examples=200, deadline=None)
@given(text=st.text())
def test_text_that_names_no_picture_is_left_as_it_is(text: Any) -> None:
    picture = Picture(
        path="/nowhere/x.png", forms=("/nowhere/x.png",), name="x.png", content_type="", data=b""
    )
    if "/nowhere/x.png" not in text:
        assert attach(text, [picture]) == text


# --- through the tools, against the real server ----------------------------------------------


@dataclass
class Inbox:
    tools: dict[str, Tool]
    bare: dict[str, Tool]  # the same tools on a runner with no sandbox
    sent: list[gw.CommsCallRequest]
    http_port: int
    ada_token: str

    async def run(self, name: str, args: dict[str, Any]) -> str:
        return await self.tools[name].handler(args)

    async def ada(self, method: str, body: dict[str, Any]) -> Any:
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(
                f"http://127.0.0.1:{self.http_port}/compass.v1.InboxService/{method}",
                json=body,
                headers={"authorization": f"Bearer {self.ada_token}"},
            )
        assert response.status_code == 200, response.text
        return response.json()

    async def thread(self, key: str) -> list[dict[str, Any]]:
        listed = await self.ada("ListInboxItems", {})
        [item] = [i for i in listed.get("items", []) if i["key"] == key]
        got = await self.ada("GetInboxItem", {"itemId": item["itemId"]})
        return [{**entry, "itemId": item["itemId"]} for entry in got["thread"]]


@pytest.fixture
async def inbox(server: Any, api_world: World, sandbox: Sandbox) -> AsyncIterator[Inbox]:
    relay = Relay(f"127.0.0.1:{server.grpc_port}", await runner_for(api_world))
    await relay.start()

    async def heard(event: Any) -> None:
        del event

    session = await relay.bind(str(api_world.agent.account_id), heard)
    call = relay.caller(session.session_id)
    sent: list[gw.CommsCallRequest] = []

    async def recorded(request: gw.CommsCallRequest) -> gw.CommsCallResult:
        sent.append(request)
        return await call(request)

    yield Inbox(
        {t.name: t for t in comms_tools(recorded, sandbox=sandbox)},
        {t.name: t for t in comms_tools(recorded)},
        sent,
        server.http_port,
        api_world.tokens[api_world.human.account_id],
    )
    await relay.close()


def text_of(entry: dict[str, Any]) -> str:
    return "".join(b["text"]["text"] for b in entry["message"].get("blocks", []) if "text" in b)


async def test_an_inbox_post_carries_its_pictures_and_names_each_by_its_address(
    inbox: Inbox,
) -> None:
    said = await inbox.run(
        "comms_inbox_post",
        {
            "key": "login",
            "title": "The login form",
            "body": "It breaks on submit: see shots/login.png (and `shots/login.png` in code).",
            "pictures": ["shots/login.png", "chart.gif"],
        },
    )
    [entry] = await inbox.thread("login")
    attachments = entry["attachments"]
    login = f"/inbox/{entry['itemId']}/files/{attachments[0]['attachmentId']}"
    assert attachments[0]["address"] == login
    assert f"Attached 2 pictures: login.png at {login}, chart.gif at /inbox/" in said
    # The server drew the picture the kit named by its address.
    assert text_of(entry) == f"It breaks on submit: see {login} (and `shots/login.png` in code)."
    assert [(a["name"], a["contentType"]) for a in attachments] == [
        ("login.png", "image/png"),
        ("chart.gif", "image/gif"),
    ]
    got = await inbox.ada(
        "GetInboxAttachment",
        {"itemId": entry["itemId"], "attachmentId": attachments[0]["attachmentId"]},
    )
    assert base64.b64decode(got["data"]) == png()


async def test_a_reply_may_be_pictures_alone(inbox: Inbox) -> None:
    await inbox.run("comms_inbox_post", {"key": "chart", "body": "Weekly numbers."})
    said = await inbox.run("comms_inbox_reply", {"key": "chart", "pictures": ["chart.gif"]})
    assert said.startswith('Replied in inbox item "chart". Attached 1 picture: chart.gif')
    replied = await inbox.run(
        "comms_inbox_reply",
        {"key": "chart", "text": "Same as chart.gif", "pictures": ["chart.gif"]},
    )
    assert "Attached 1 picture" in replied
    _, alone, named = await inbox.thread("chart")
    assert text_of(alone) == "" and [a["name"] for a in alone["attachments"]] == ["chart.gif"]
    assert text_of(named) == f"Same as {named['attachments'][0]['address']}"


async def test_a_refused_picture_sends_nothing(inbox: Inbox, tmp_path: pathlib.Path) -> None:
    (tmp_path / "secret.png").write_bytes(png())
    cases = [
        (
            {"key": "k", "body": "x", "pictures": [str(tmp_path / "secret.png")]},
            "comms_inbox_post failed: permission_denied: picture ",
        ),
        (
            {"key": "k", "body": "x", "pictures": ["missing.png"]},
            "comms_inbox_post failed: not_found: picture 'missing.png'",
        ),
        (
            {"key": "k", "body": "x", "pictures": ["chart.gif"] * 11},
            "comms_inbox_post failed: invalid_argument: pictures must have at most 10 item(s)",
        ),
    ]
    for args, expected in cases:
        with pytest.raises(ToolError) as failed:
            await inbox.run("comms_inbox_post", args)
        assert str(failed.value).startswith(expected), str(failed.value)
    with pytest.raises(ToolError) as failed:
        await inbox.bare["comms_inbox_reply"].handler({"key": "k", "pictures": ["chart.gif"]})
    assert str(failed.value).startswith("comms_inbox_reply failed: failed_precondition: ")
    assert "no sandbox" in str(failed.value)
    assert inbox.sent == []
