"""Push to phones and closed tabs, and each person's preferences, end to
end: a person sets their surfaces and quiet hours over the API; an admin
adds a push endpoint; the browser's subscription is kept; an agent asks, and
a push service on loopback gets a message it decrypts (RFC 8291) under a
VAPID JWT it verifies with the key the server publishes (RFC 8292), carrying
the link that opens the ask. A 404/410 from the push service removes the
subscription; quiet hours hold back all but an urgent notification."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import time
import urllib.parse
import zoneinfo
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest

from compass.v1 import admin_pb2 as ad
from compass.v1 import preferences_pb2 as pb
from compass_server.store.types import Ask, AskOption, AskQuestion, FollowUp, Surface
from compass_server.store.vault import new_key
from tests.conftest import running_server
from tests.pushservice import Browser, b64, verify_vapid
from tests.receiver import Receiver, Reply
from tests.servers import CallError, GrpcClient
from tests.world import World

pytestmark = pytest.mark.timeout(120)

KEY = new_key()
SUBJECT = "mailto:push@example.test"


@pytest.fixture(scope="module")
async def pushing(
    database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Any]:
    # The deployment's push key is sealed with the webhook key of the server
    # that made it: one made earlier in this run's database by a server with
    # another key (a page that read the preferences) is not this one's.
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("DELETE FROM push_vapid_key")
    async with running_server(
        database_url,
        tmp_path_factory.mktemp("push"),
        webhook_key=KEY,
        webhook_allowed_networks="127.0.0.0/8",
        webhook_retry_schedule="0.3s,0.3s,0.3s",
        webhook_timeout_seconds=3.0,
        webhook_poll_seconds=0.1,
    ) as srv:
        srv.courier.pusher.public_url = f"http://127.0.0.1:{srv.http_port}"
        yield srv


@pytest.fixture(scope="module")
async def rpc(pushing: Any) -> AsyncIterator[GrpcClient]:
    c = GrpcClient(pushing.grpc_port)
    yield c
    await c.close()


# What the push service answers, per endpoint path; 201 unless a test says.
ANSWERS: dict[str, int] = {}


@pytest.fixture(scope="module")
async def service() -> AsyncIterator[Receiver]:
    r = await Receiver(lambda got: Reply(status=ANSWERS.get(got.path, 201), body=b"")).start()
    yield r
    await r.close()


@pytest.fixture
async def w(pushing: Any) -> AsyncIterator[World]:
    world = await World.create(pushing.store)
    yield world
    async with await psycopg.AsyncConnection.connect(pushing.database_url) as conn:
        await conn.execute(
            "DELETE FROM webhook_endpoints WHERE workspace_id = %s", (world.workspace_id,)
        )


def tok(w: World, who: Any = None) -> str:
    return w.tokens[(who or w.human).account_id]


def ship_it(*people: Any) -> Ask:
    return Ask(
        questions=(
            AskQuestion(
                question_id="go",
                question="Ship it?",
                header="Release",
                options=(AskOption("y", "Yes"), AskOption("n", "No")),
            ),
        ),
        answerer_ids=tuple(p.account_id for p in people),
    )


async def post(w: World, ask: Ask) -> str:
    m = await w.post_ask(w.agent, ask)
    block = m.blocks[0]
    assert isinstance(block, Ask)
    return block.ask_id


async def push_endpoint(rpc: GrpcClient, w: World) -> ad.Webhook:
    made = await rpc.call(
        "CreateWebhook", ad.CreateWebhookRequest(url=SUBJECT, kind=ad.WEBHOOK_KIND_PUSH), tok(w)
    )
    return made.webhook


async def subscribe(rpc: GrpcClient, w: World, service: Receiver, who: Any = None) -> Browser:
    path = f"/push/{time.monotonic_ns()}"
    browser = Browser.new(service.url(path))
    await rpc.call(
        "AddPushSubscription",
        pb.AddPushSubscriptionRequest(
            endpoint=browser.endpoint, p256dh=browser.p256dh, auth=b64(browser.auth)
        ),
        tok(w, who),
    )
    return browser


def at(browser: Browser) -> Any:
    path = urllib.parse.urlsplit(browser.endpoint).path
    return lambda got: got.path == path


async def deliveries(rpc: GrpcClient, w: World, hook: ad.Webhook, n: int, done: Any) -> Any:
    for _ in range(300):
        page = await rpc.call(
            "ListWebhookDeliveries",
            ad.ListWebhookDeliveriesRequest(webhook_id=hook.webhook_id, page_size=20),
            tok(w),
        )
        if len(page.deliveries) >= n and all(done(d) for d in page.deliveries):
            return page.deliveries
        await asyncio.sleep(0.1)
    raise AssertionError(f"deliveries never settled: {page.deliveries}")


async def test_a_person_reads_and_sets_their_preferences(
    pushing: Any, rpc: GrpcClient, w: World
) -> None:
    got = await rpc.call(
        "GetNotificationPreferences", pb.GetNotificationPreferencesRequest(), tok(w)
    )
    p = got.preferences
    # The defaults: the settings' values.
    assert (p.page, p.push, p.email) == (True, True, pb.MAIL_PREFERENCE_NAMED)
    assert (p.quiet_start, p.quiet_end, p.time_zone) == ("", "", "UTC")
    assert len(got.vapid_public_key) == 87  # 65 bytes, base64url

    wanted = pb.NotificationPreferences(
        page=False,
        push=True,
        email=pb.MAIL_PREFERENCE_ALL,
        quiet_start="22:30",
        quiet_end="07:00",
        time_zone="Europe/Paris",
    )
    saved = await rpc.call(
        "SetNotificationPreferences",
        pb.SetNotificationPreferencesRequest(preferences=wanted),
        tok(w),
    )
    assert saved.preferences == wanted
    again = await rpc.call(
        "GetNotificationPreferences", pb.GetNotificationPreferencesRequest(), tok(w)
    )
    assert again.preferences == wanted
    async with await psycopg.AsyncConnection.connect(pushing.database_url) as conn:
        row = await (
            await conn.execute(
                "SELECT email, page, push, quiet_start, quiet_end, time_zone "
                "FROM notification_preferences WHERE account_id = %s",
                (w.human.account_id,),
            )
        ).fetchone()
    assert row == ("all", False, True, 22 * 60 + 30, 7 * 60, "Europe/Paris")
    # Another person's are their own: grace still has the defaults.
    theirs = await rpc.call(
        "GetNotificationPreferences", pb.GetNotificationPreferencesRequest(), tok(w, w.other_human)
    )
    assert theirs.preferences.page and theirs.preferences.quiet_start == ""

    bad = [
        pb.NotificationPreferences(time_zone="Mars/Olympus"),
        pb.NotificationPreferences(time_zone="../../etc/passwd"),
        pb.NotificationPreferences(quiet_start="22:00"),
        pb.NotificationPreferences(quiet_start="25:00", quiet_end="07:00"),
        pb.NotificationPreferences(quiet_start="7pm", quiet_end="07:00"),
        pb.NotificationPreferences(quiet_start="07:00", quiet_end="07:00"),
    ]
    for prefs in bad:
        with pytest.raises(CallError) as err:
            await rpc.call(
                "SetNotificationPreferences",
                pb.SetNotificationPreferencesRequest(preferences=prefs),
                tok(w),
            )
        assert err.value.code == "invalid_argument", prefs
        assert "Traceback" not in err.value.message
    # An agent has no preferences.
    with pytest.raises(CallError) as err:
        await rpc.call(
            "GetNotificationPreferences", pb.GetNotificationPreferencesRequest(), tok(w, w.agent)
        )
    assert err.value.code == "permission_denied"


async def test_a_posted_ask_is_pushed_encrypted_and_signed_and_opens_the_ask(
    pushing: Any, rpc: GrpcClient, w: World, service: Receiver
) -> None:
    hook = await push_endpoint(rpc, w)
    assert hook.kind == ad.WEBHOOK_KIND_PUSH and hook.url == SUBJECT
    key = (
        await rpc.call("GetNotificationPreferences", pb.GetNotificationPreferencesRequest(), tok(w))
    ).vapid_public_key
    browser = await subscribe(rpc, w, service)
    elsewhere = await subscribe(rpc, w, service, w.other_human)
    ask_id = await post(w, ship_it(w.human))
    [got] = await service.wait_for(1, where=at(browser))
    assert got.headers["content-encoding"] == "aes128gcm"
    assert int(got.headers["ttl"]) > 0
    claims = verify_vapid(got, key)
    assert claims["sub"] == SUBJECT
    assert claims["aud"] == f"http://127.0.0.1:{service.port}"
    assert time.time() < claims["exp"] <= time.time() + 24 * 3600
    shown = browser.decrypt(got.body)
    assert shown["title"] == "scout asks"
    assert shown["body"] == "Release"
    assert shown["tag"] == f"ask-{ask_id}" and shown["urgent"] is False
    # Another browser's keys can't read it.
    with pytest.raises(Exception):  # noqa: B017 — http_ece's own failure
        elsewhere.decrypt(got.body)
    # The click's link opens the ask for this person.
    async with httpx.AsyncClient() as http:
        page = await http.get(shown["url"])
    assert page.status_code == 200 and "Ship it?" in page.text
    # The ask names ada only: grace's browser gets nothing.
    done = await deliveries(
        rpc, w, hook, 1, lambda d: d.state == ad.WEBHOOK_DELIVERY_STATE_DELIVERED
    )
    assert [d.event_type for d in done] == ["ask.posted"]
    assert not [r for r in service.received if at(elsewhere)(r)]


async def test_a_subscription_the_push_service_says_is_gone_is_removed(
    pushing: Any, rpc: GrpcClient, w: World, service: Receiver
) -> None:
    hook = await push_endpoint(rpc, w)
    browser = await subscribe(rpc, w, service)
    ANSWERS[urllib.parse.urlsplit(browser.endpoint).path] = 410
    await post(w, ship_it(w.human))
    await service.wait_for(1, where=at(browser))
    [failed] = await deliveries(
        rpc, w, hook, 1, lambda d: d.state == ad.WEBHOOK_DELIVERY_STATE_FAILED
    )
    assert failed.attempts == 1
    one = await rpc.call(
        "GetWebhookDelivery", ad.GetWebhookDeliveryRequest(delivery_id=failed.delivery_id), tok(w)
    )
    assert "the subscription is gone and was removed" in one.attempts[0].error
    async with await psycopg.AsyncConnection.connect(pushing.database_url) as conn:
        n = await (
            await conn.execute(
                "SELECT count(*) FROM push_subscriptions WHERE account_id = %s",
                (w.human.account_id,),
            )
        ).fetchone()
    assert n == (0,)
    # The endpoint itself stays on: a 410 was about one browser.
    [listed] = (await rpc.call("ListWebhooks", ad.ListWebhooksRequest(), tok(w))).webhooks
    assert listed.enabled, listed
    # The next ask pushes to ada's other browser, not the removed one.
    again = await subscribe(rpc, w, service)
    await post(w, ship_it(w.human))
    await service.wait_for(1, where=at(again))
    assert len([r for r in service.received if at(browser)(r)]) == 1


async def test_quiet_hours_hold_back_a_notification_that_isnt_urgent(
    pushing: Any, rpc: GrpcClient, w: World, service: Receiver
) -> None:
    hook = await push_endpoint(rpc, w)
    browser = await subscribe(rpc, w, service)
    # Quiet from an hour ago to an hour from now, in the person's zone.
    zone = "Asia/Tokyo"
    now = datetime.datetime.now(datetime.UTC).astimezone(zoneinfo.ZoneInfo(zone))
    start = (now - datetime.timedelta(hours=1)).strftime("%H:%M")
    end = (now + datetime.timedelta(hours=1)).strftime("%H:%M")
    await rpc.call(
        "SetNotificationPreferences",
        pb.SetNotificationPreferencesRequest(
            preferences=pb.NotificationPreferences(
                page=True, push=True, quiet_start=start, quiet_end=end, time_zone=zone
            )
        ),
        tok(w),
    )
    ask_id = await post(w, ship_it(w.human))
    [held] = await deliveries(rpc, w, hook, 1, lambda d: d.attempts == 1 and d.last_error)
    # Held, not dropped: it waits, pending, for the quiet hours' end.
    assert held.state == ad.WEBHOOK_DELIVERY_STATE_PENDING
    assert held.last_error == f"held: the person's quiet hours, until {end} {zone}"
    due = held.next_attempt_at.ToDatetime(datetime.UTC)
    ends = (now + datetime.timedelta(hours=1)).replace(second=0, microsecond=0)
    assert abs((due - ends).total_seconds()) < 5, (due, ends)
    await asyncio.sleep(0.5)
    assert not [r for r in service.received if at(browser)(r)]

    # The quiet hours over (they ended an hour ago, as the person now says),
    # and the held push come due as time would bring it: it goes.
    await rpc.call(
        "SetNotificationPreferences",
        pb.SetNotificationPreferencesRequest(
            preferences=pb.NotificationPreferences(
                page=True,
                push=True,
                quiet_start=(now - datetime.timedelta(hours=3)).strftime("%H:%M"),
                quiet_end=(now - datetime.timedelta(hours=1)).strftime("%H:%M"),
                time_zone=zone,
            )
        ),
        tok(w),
    )
    async with await psycopg.AsyncConnection.connect(pushing.database_url) as conn:
        await conn.execute(
            "UPDATE webhook_deliveries SET next_attempt_at = now() WHERE id = %s",
            (held.delivery_id,),
        )
    [got] = await service.wait_for(1, where=at(browser))
    assert browser.decrypt(got.body)["tag"] == f"ask-{ask_id}"
    # And the next ask goes at once.
    await post(w, ship_it(w.human))
    await service.wait_for(2, where=at(browser))

    # Push turned off: nothing made for them at all.
    await rpc.call(
        "SetNotificationPreferences",
        pb.SetNotificationPreferencesRequest(
            preferences=pb.NotificationPreferences(page=True, push=False, time_zone=zone)
        ),
        tok(w),
    )
    await post(w, ship_it(w.human))
    await asyncio.sleep(1.0)
    assert len([r for r in service.received if at(browser)(r)]) == 2


async def test_a_subscription_is_checked_bounded_and_removed_by_its_person(
    pushing: Any, rpc: GrpcClient, w: World, service: Receiver
) -> None:
    good = Browser.new(service.url("/push/checked"))
    cases = [
        ("ftp://push.example/x", good.p256dh, b64(good.auth)),
        ("https://push.example/" + "x" * 2100, good.p256dh, b64(good.auth)),
        (good.endpoint, "not base64!", b64(good.auth)),
        (good.endpoint, b64(b"\x04" + b"\x01" * 10), b64(good.auth)),
        (good.endpoint, good.p256dh, b64(b"short")),
    ]
    for endpoint, p256dh, auth in cases:
        with pytest.raises(CallError) as err:
            await rpc.call(
                "AddPushSubscription",
                pb.AddPushSubscriptionRequest(endpoint=endpoint, p256dh=p256dh, auth=auth),
                tok(w),
            )
        assert err.value.code == "invalid_argument", (endpoint[:40], p256dh)
    most = pushing.settings.notify_push_subscriptions
    made = [await subscribe(rpc, w, service) for _ in range(most)]
    with pytest.raises(CallError) as err:
        await subscribe(rpc, w, service)
    assert err.value.code == "resource_exhausted"
    # The same browser again replaces its keys rather than counting twice.
    again = await rpc.call(
        "AddPushSubscription",
        pb.AddPushSubscriptionRequest(
            endpoint=made[0].endpoint, p256dh=made[0].p256dh, auth=b64(made[0].auth)
        ),
        tok(w),
    )
    assert again.subscription.endpoint == made[0].endpoint
    # grace can't remove ada's.
    other = await rpc.call(
        "RemovePushSubscription",
        pb.RemovePushSubscriptionRequest(endpoint=made[0].endpoint),
        tok(w, w.other_human),
    )
    assert other.removed is False
    mine = await rpc.call(
        "RemovePushSubscription",
        pb.RemovePushSubscriptionRequest(endpoint=made[0].endpoint),
        tok(w),
    )
    assert mine.removed is True
    await subscribe(rpc, w, service)


async def test_the_settings_view_shows_and_saves_a_persons_preferences(
    pushing: Any, browser: Any, w: World, shots: Any
) -> None:
    from playwright.async_api import expect

    from tests.browser import new_tab, sign_in

    async with new_tab(browser, pushing) as page:
        # Installable: the manifest the page links to.
        manifest = await page.request.get("/manifest.json")
        assert manifest.ok and (await manifest.json())["start_url"] == "/"
        await sign_in(page, tok(w))
        await expect(page.locator('link[rel="manifest"]')).to_have_attribute(
            "href", "/manifest.json"
        )
        await page.get_by_role("link", name="Notification settings").click()
        await expect(page.get_by_role("heading", name="Notifications")).to_be_visible()
        tab = page.get_by_label("A notification from an open Compass tab")
        await expect(tab).to_be_checked()
        await expect(page.get_by_label("Push, even with no tab open")).to_be_checked()
        await expect(page.get_by_label("Mail")).to_have_value("MAIL_PREFERENCE_NAMED")
        await tab.uncheck()
        await page.get_by_label("Mail").select_option(label="No mail")
        await page.get_by_label("Quiet from").fill("22:00")
        await page.get_by_label("Quiet until").fill("07:30")
        await page.get_by_label("Time zone").fill("Europe/Berlin")
        await page.get_by_role("button", name="Save").click()
        await expect(page.locator(".settings-status")).to_have_text("Saved.")
        # A time zone nobody has: the server's words, nothing saved.
        await page.get_by_label("Time zone").fill("Nowhere/Atlantis")
        await page.get_by_role("button", name="Save").click()
        await expect(page.locator(".settings-status")).to_contain_text(
            "Couldn't save: no time zone 'Nowhere/Atlantis'"
        )
        # The service worker that shows pushes is registered for the page.
        scope = await page.evaluate("navigator.serviceWorker.ready.then((r) => r.scope)")
        assert scope == f"http://127.0.0.1:{pushing.http_port}/"

    async with await psycopg.AsyncConnection.connect(pushing.database_url) as conn:
        row = await (
            await conn.execute(
                "SELECT email, page, push, quiet_start, quiet_end, time_zone "
                "FROM notification_preferences WHERE account_id = %s",
                (w.human.account_id,),
            )
        ).fetchone()
    assert row == ("off", False, True, 22 * 60, 7 * 60 + 30, "Europe/Berlin")

    async with new_tab(browser, pushing) as page:
        await sign_in(page, tok(w))
        await page.goto("/#/settings")
        await expect(page.get_by_label("Quiet from")).to_have_value("22:00")
        await expect(page.get_by_label("Quiet until")).to_have_value("07:30")
        await expect(page.get_by_label("Time zone")).to_have_value("Europe/Berlin")
        await expect(
            page.get_by_label("A notification from an open Compass tab")
        ).not_to_be_checked()
        await expect(page.get_by_label("Mail")).to_have_value("MAIL_PREFERENCE_OFF")
        for width, height in ((1280, 800), (390, 844)):
            await page.set_viewport_size({"width": width, "height": height})
            await page.screenshot(path=str(shots / f"web-settings-{width}.png"), full_page=True)


async def test_the_service_worker_shows_a_delivered_push(
    pushing: Any, browser: Any, w: World
) -> None:
    from playwright.async_api import expect

    from tests.browser import new_tab, sign_in

    origin = f"http://127.0.0.1:{pushing.http_port}"
    async with new_tab(browser, pushing) as page:
        await page.context.grant_permissions(["notifications"], origin=origin)
        await sign_in(page, tok(w))
        await page.evaluate("navigator.serviceWorker.ready.then(() => true)")
        data = {
            "title": "scout asks",
            "body": "Release",
            "url": f"{origin}/#/settings",
            "tag": "ask-test",
            "urgent": False,
        }
        import json as _json

        shown = await _push_until_shown(page, origin, _json.dumps(data), "ask-test", bool)
        assert shown == [{"title": "scout asks", "body": "Release", "actions": []}]
        opens = await page.evaluate(
            """navigator.serviceWorker.ready
                 .then((r) => r.getNotifications({ tag: "ask-test" }))
                 .then((ns) => ns.map((n) => n.data.url))"""
        )
        assert opens == [data["url"]]
        await expect(page.locator("#live-status")).to_have_attribute("data-state", "live")


async def test_an_ask_for_the_channel_pushes_to_its_people_and_private_addresses_are_refused(
    pushing: Any, rpc: GrpcClient, w: World, service: Receiver
) -> None:
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    hook = await push_endpoint(rpc, w)
    ada = await subscribe(rpc, w, service)
    grace = await subscribe(rpc, w, service, w.other_human)
    # A person's endpoint somewhere the webhook address checks don't let through.
    inside = Browser.new("http://10.1.2.3/push/inside")
    await rpc.call(
        "AddPushSubscription",
        pb.AddPushSubscriptionRequest(
            endpoint=inside.endpoint, p256dh=inside.p256dh, auth=b64(inside.auth)
        ),
        tok(w, w.other_human),
    )
    # An ask that names nobody: every person of the channel (the agent asks).
    await post(w, Ask(questions=ship_it().questions))
    await service.wait_for(1, where=at(ada))
    await service.wait_for(1, where=at(grace))
    done = await deliveries(
        rpc,
        w,
        hook,
        3,
        lambda d: (
            d.state in (ad.WEBHOOK_DELIVERY_STATE_DELIVERED, ad.WEBHOOK_DELIVERY_STATE_FAILED)
        ),
    )
    assert len(done) == 3
    [refused] = [d for d in done if d.state != ad.WEBHOOK_DELIVERY_STATE_DELIVERED]
    assert refused.last_error.startswith("refused:"), refused.last_error


def test_quiet_hours_run_past_midnight_in_the_persons_zone() -> None:
    from compass_server.notify.preferences import Preferences, held, quiet_now

    night = Preferences(True, True, "named", 22 * 60, 7 * 60, "Europe/Paris")
    utc = datetime.UTC
    # 21:30 UTC is 22:30 in Paris in winter: quiet; 06:30 UTC is 07:30: not.
    assert quiet_now(night, datetime.datetime(2026, 1, 15, 21, 30, tzinfo=utc))
    assert quiet_now(night, datetime.datetime(2026, 1, 15, 5, 59, tzinfo=utc))
    assert not quiet_now(night, datetime.datetime(2026, 1, 15, 6, 30, tzinfo=utc))
    # In summer Paris is UTC+2: 20:30 UTC is already 22:30 there.
    assert quiet_now(night, datetime.datetime(2026, 7, 15, 20, 30, tzinfo=utc))
    day = Preferences(True, True, "named", 9 * 60, 17 * 60, "UTC")
    assert quiet_now(day, datetime.datetime(2026, 7, 15, 9, 0, tzinfo=utc))
    assert not quiet_now(day, datetime.datetime(2026, 7, 15, 17, 0, tzinfo=utc))
    # Held until the end, in the person's wall-clock time.
    why, wait = held(night, datetime.datetime(2026, 1, 15, 21, 30, tzinfo=utc)) or ("", None)
    assert why == "held: the person's quiet hours, until 07:00 Europe/Paris"
    assert wait == datetime.timedelta(hours=8, minutes=30, seconds=1)
    assert held(night, datetime.datetime(2026, 1, 15, 12, 0, tzinfo=utc)) is None
    none = Preferences(True, True, "named", None, None, "UTC")
    assert not quiet_now(none, datetime.datetime(2026, 7, 15, 3, 0, tzinfo=utc))


async def test_an_escalation_is_pushed_to_the_person_it_adds_even_in_their_quiet_hours(
    rpc: GrpcClient, w: World, service: Receiver
) -> None:
    await push_endpoint(rpc, w)
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    grace = await subscribe(rpc, w, service, w.other_human)
    # Grace is in her quiet hours the whole test: only an urgent push reaches her.
    zone = "America/Chicago"
    now = datetime.datetime.now(datetime.UTC).astimezone(zoneinfo.ZoneInfo(zone))
    await rpc.call(
        "SetNotificationPreferences",
        pb.SetNotificationPreferencesRequest(
            preferences=pb.NotificationPreferences(
                page=True,
                push=True,
                quiet_start=(now - datetime.timedelta(hours=1)).strftime("%H:%M"),
                quiet_end=(now + datetime.timedelta(hours=1)).strftime("%H:%M"),
                time_zone=zone,
            )
        ),
        tok(w, w.other_human),
    )
    ask = dataclasses.replace(
        ship_it(w.human),
        follow_up=FollowUp(
            escalate_after=datetime.timedelta(seconds=1),
            escalate_to=(w.other_human.account_id,),
        ),
    )
    ask_id = await post(w, ask)
    # The post names only ada: nothing for grace until the escalation adds her.
    await asyncio.sleep(0.5)
    assert not [r for r in service.received if at(grace)(r)]
    [got] = await service.wait_for(1, where=at(grace))
    shown = grace.decrypt(got.body)
    assert shown["title"] == "Urgent: scout asks" and shown["tag"] == f"ask-{ask_id}"
    assert got.headers.get("urgency") == "high"


async def _deliver_to_worker(page: Any, origin: str, payload: str) -> None:
    """A push as the push service would hand it to this page's service worker:
    to each registration of the origin (the browser may list those of the
    module's other tests too), since only this page's can show it."""
    cdp = await page.context.new_cdp_session(page)
    registrations: list[dict[str, Any]] = []
    cdp.on(
        "ServiceWorker.workerRegistrationUpdated",
        lambda e: registrations.extend(e["registrations"]),
    )
    await cdp.send("ServiceWorker.enable")
    ours: set[str] = set()
    deadline = time.monotonic() + 30
    while not ours and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        ours = {r["registrationId"] for r in registrations if r["scopeURL"] == origin + "/"}
    assert ours
    for registration_id in ours:
        with contextlib.suppress(Exception):
            await cdp.send(
                "ServiceWorker.deliverPushMessage",
                {"origin": origin, "registrationId": registration_id, "data": payload},
            )


async def _push_until_shown(
    page: Any, origin: str, payload: str, tag: str, done: Any
) -> list[dict[str, Any]]:
    """Delivers a push until its notification shows as `done` wants: a push
    delivered before the worker can take it (a busy machine) is lost."""
    deadline = time.monotonic() + 60
    while True:
        await _deliver_to_worker(page, origin, payload)
        shown = await _shown(page, tag, done, within=5)
        if done(shown) or time.monotonic() > deadline:
            return shown


async def _shown(page: Any, tag: str, done: Any, within: float = 60) -> list[dict[str, Any]]:
    """This page's notifications with `tag`, once `done(them)` holds."""
    deadline = time.monotonic() + within
    while True:
        shown: list[dict[str, Any]] = await page.evaluate(
            """(tag) => navigator.serviceWorker.ready
                 .then((r) => r.getNotifications({ tag }))
                 .then((ns) => ns.map((n) => ({ title: n.title, body: n.body,
                   actions: n.actions.map((a) => ({ action: a.action, title: a.title })) })))""",
            tag,
        )
        if done(shown) or time.monotonic() > deadline:
            return shown
        await asyncio.sleep(0.05)


async def _tap(page: Any, tag: str, choice: str) -> None:
    """A tap on a choice of the notification: the worker's own handler of it,
    run in the worker (a headless browser has no notification to press)."""
    [worker] = page.context.service_workers
    await worker.evaluate(
        """async ([tag, choice]) => {
             const [shown] = await self.registration.getNotifications({ tag });
             shown.close();
             await tapped(shown, choice);
           }""",
        [tag, choice],
    )


def test_a_push_carries_choices_only_for_an_ask_one_tap_answers() -> None:
    from compass_server.notify.push import ACTION_CHARS, actions

    def ask(*questions: Any, quorum: Any = None) -> dict[str, Any]:
        return {"questions": list(questions), "quorum": quorum}

    def q(options: int, multiple: bool = False) -> dict[str, Any]:
        return {
            "question_id": "go",
            "allow_multiple": multiple,
            "options": [{"id": f"o{i}", "label": f"Option {i}" * (i + 1)} for i in range(options)],
        }

    assert actions(ask(q(2))) == [
        {"action": "o0", "title": "Option 0"},
        {"action": "o1", "title": "Option 1Option 1"},
    ]
    assert len(actions(ask(q(1)))) == 1
    # A long label is cut to what a button shows.
    long = q(2)
    long["options"][0]["label"] = "a choice with a very long label " * 3
    [first, _] = actions(ask(long))
    assert len(first["title"]) == ACTION_CHARS and first["title"].endswith("…")
    # More than a notification shows, several at once, more than one question,
    # a free-text-only question, a quorum's final vote: the page, not a tap.
    for needs_more in (
        ask(q(3)),
        ask(q(2, multiple=True)),
        ask(q(2), q(2)),
        ask(q(0)),
        ask(q(2), quorum={"required": 2}),
        ask(),
    ):
        assert actions(needs_more) == [], needs_more


async def test_a_tap_on_a_pushed_choice_answers_from_the_service_worker(
    pushing: Any, rpc: GrpcClient, w: World, service: Receiver, browser: Any, shots: Any
) -> None:
    """The push of a one-tap ask carries its choices; a tap answers it through
    the link with no page opened, and the notification says so. A second tap
    (or the page's own Submit) is told the ask already ended; nothing else is
    recorded."""
    from playwright.async_api import expect

    from tests.browser import PHONE, ask_block, new_tab, question, sign_in

    origin = f"http://127.0.0.1:{pushing.http_port}"
    await push_endpoint(rpc, w)
    subscribed = await subscribe(rpc, w, service)
    ask_id = await post(w, ship_it(w.human))
    [got] = await service.wait_for(1, where=at(subscribed))
    pushed = subscribed.decrypt(got.body)
    assert pushed["actions"] == [{"action": "y", "title": "Yes"}, {"action": "n", "title": "No"}]
    assert pushed["ask_id"] == ask_id and pushed["question_id"] == "go"
    tag = f"ask-{ask_id}"

    async with new_tab(browser, pushing, PHONE) as page:
        await page.context.grant_permissions(["notifications"], origin=origin)
        await sign_in(page, tok(w))
        await page.evaluate("navigator.serviceWorker.ready.then(() => true)")
        # The link's page is open too, a choice made but not sent.
        link = await page.context.new_page()
        await link.goto(pushed["url"])
        form = ask_block(link, ask_id)
        await question(form, "go").get_by_label("No").check()

        import json as _json

        shown = await _push_until_shown(page, origin, _json.dumps(pushed), tag, bool)
        assert shown == [
            {
                "title": "scout asks",
                "body": "Release",
                "actions": [{"action": "y", "title": "Yes"}, {"action": "n", "title": "No"}],
            }
        ]
        await _tap(page, tag, "y")
        shown = await _shown(page, tag, lambda s: s and s[0]["body"] != "Release")
        assert shown == [{"title": "scout asks", "body": "Answered: Yes.", "actions": []}]
        _, ask = await w.store.get_ask(w.human, ask_id)
        assert ask.ending is not None and ask.ending.actor_id == w.human.account_id
        assert ask.ending.surface is Surface.PUSH
        assert ask.questions[0].chosen_option_ids == ("y",)

        # The page's Submit after the tap: told why, nothing recorded.
        await form.get_by_role("button", name="Submit answers").click()
        await expect(form.locator(".ask-ending-line")).to_have_text("Answered by ada.")
        await expect(form.locator(".ask-dropped")).to_have_text(
            "Your answers weren't recorded: the ask had already ended."
        )
        await link.screenshot(path=str(shots / "link-after-tap-390.png"), full_page=True)

        # The same push again (a second device's, say): its tap is told the ask ended.
        await _push_until_shown(
            page, origin, _json.dumps(pushed), tag, lambda s: s and s[0]["actions"]
        )
        await _tap(page, tag, "n")
        shown = await _shown(page, tag, lambda s: s and s[0]["body"].startswith("Not answered"))
        [said] = shown
        assert said["body"].startswith("Not answered: ") and "already answered" in said["body"]
        assert said["actions"] == []
    _, ask = await w.store.get_ask(w.human, ask_id)
    assert ask.questions[0].chosen_option_ids == ("y",)


async def test_a_push_about_an_ask_that_needs_more_carries_no_choices(
    pushing: Any, rpc: GrpcClient, w: World, service: Receiver
) -> None:
    from tests.world import two_question_ask

    await push_endpoint(rpc, w)
    subscribed = await subscribe(rpc, w, service)
    ask_id = await post(
        w, Ask(questions=two_question_ask().questions, answerer_ids=(w.human.account_id,))
    )
    [got] = await service.wait_for(1, where=at(subscribed))
    pushed = subscribed.decrypt(got.body)
    assert pushed["actions"] == [] and pushed["ask_id"] == ask_id
    # A tap forged for it anyway is refused: it opens the page instead.
    async with httpx.AsyncClient() as http:
        tapped = await http.post(
            pushed["url"],
            json={
                "askId": ask_id,
                "action": "answer",
                "tap": True,
                "answers": [{"questionId": "db", "chosenOptionIds": ["pg"]}],
            },
        )
    assert tapped.status_code == 400 and tapped.json()["code"] == "failed_precondition"
    assert "more than one tap" in tapped.json()["message"]
    _, ask = await w.store.get_ask(w.human, ask_id)
    assert ask.is_open
