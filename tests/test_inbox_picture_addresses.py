"""A picture named in a message's text by `attachment:<name>` is drawn by its
attachment's address, minted in the same write; the address serves the bytes
to whoever may read the item, over plain HTTP with the same token."""

from __future__ import annotations

import re
from typing import Any

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from compass_agentkit.pictures import Picture as KitPicture
from compass_agentkit.pictures import attach
from compass_server.inbox.pictures import Picture, draw
from compass_server.store.inbox import InboxStore
from compass_server.store.types import TextBlock
from tests.test_inbox_store import PNG
from tests.world import World

GIF = b"GIF89a" + b"\x00" * 20


def text_of(message: Any) -> str:
    return "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock))


async def test_a_named_picture_is_drawn_by_its_address(server: Any, api_world: World) -> None:
    inbox = InboxStore(server.store.db)
    item, message = await inbox.post(
        api_world.agent,
        "login",
        "Login breaks",
        "See attachment:login.png. Also attachment:login.png.bak, `attachment:chart.gif` "
        "and attachment:chart.gif",
        pictures=[Picture("login.png", PNG), Picture("chart.gif", GIF)],
    )
    ids = {a.name: a.attachment_id for a in message.attachments}
    login = f"/inbox/{item.item_id}/files/{ids['login.png']}"
    chart = f"/inbox/{item.item_id}/files/{ids['chart.gif']}"
    # Whole names only, and never inside code.
    assert text_of(message) == (
        f"See {login}. Also attachment:login.png.bak, `attachment:chart.gif` and {chart}"
    )
    (stored,) = [m for m in (await inbox.read_thread(api_world.human, item.item_id)).messages]
    assert text_of(stored) == text_of(message)


async def test_the_address_serves_the_bytes_to_a_reader_only(
    server: Any, api_world: World, store: Any
) -> None:
    inbox = InboxStore(server.store.db)
    item, message = await inbox.post(
        api_world.agent, "shot", "A shot", "attachment:s.png", pictures=[Picture("s.png", PNG)]
    )
    (address,) = re.findall(r"/inbox/\S+", text_of(message))
    base = f"http://127.0.0.1:{server.http_port}"
    ada = api_world.tokens[api_world.human.account_id]
    async with httpx.AsyncClient(base_url=base) as http:
        got = await http.get(address, headers={"authorization": f"Bearer {ada}"})
        assert got.status_code == 200
        assert got.content == PNG
        assert got.headers["content-type"] == "image/png"
        assert got.headers["x-content-type-options"] == "nosniff"
        assert (await http.get(address)).status_code == 401
        stranger = await World.create(server.store)
        other = stranger.tokens[stranger.human.account_id]
        refused = await http.get(address, headers={"authorization": f"Bearer {other}"})
        assert refused.status_code == 404
        bogus = await http.get(
            f"/inbox/{item.item_id}/files/not-an-id", headers={"authorization": f"Bearer {ada}"}
        )
        assert bogus.status_code == 404


def test_a_name_in_a_tilde_fence_stays_as_written() -> None:
    text = "See attachment:login.png\n~~~\ncat attachment:login.png\n~~~\nthen attachment:login.png"
    assert draw(text, {"login.png": "/A"}) == (
        "See /A\n~~~\ncat attachment:login.png\n~~~\nthen /A"
    )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([" PIC ", "`", "``", "```", "~~~", "~~", "\n", " x "]), max_size=30)
)
def test_the_server_draws_a_name_where_the_kit_named_it(tokens: list[str]) -> None:
    """One rule for what is code: where the kit turned a path into a name,
    the server draws the name; inside code neither touches the text."""
    text = "".join(tokens)
    picture = KitPicture(
        path="shots/a.png", forms=("shots/a.png",), name="a.png", content_type="", data=b""
    )
    named = attach(text.replace("PIC", "shots/a.png"), [picture])
    drawn = draw(text.replace("PIC", "attachment:a.png"), {"a.png": "/A"})
    assert drawn == named.replace("attachment:a.png", "/A").replace(
        "shots/a.png", "attachment:a.png"
    )
