"""A team shares research, signed in through a real OpenID Connect provider (oidc-provider-mock,
authlib's server, on a loopback port): alice, bob and carol sign in there; alice shares a chat
with the team "research"; bob follows it live and continues it in his own chats; carol, in no
team, sees none of it; bob removed from the team loses his open page of it."""

from __future__ import annotations

import re

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from oidc_provider_mock import run_server_in_thread

from chats.models import Chat, Turn
from chats.teams.models import Team, TeamMembership
from chats.watch.models import WatchRun
from demo_agent.scripted import Reply, answer_stream, cited_answer_stream
from tests.browser.conftest import ask, new_chat, open_page, wait_for_answer
from tests.chats.watch.answers import FIRST, SECOND
from tests.standins.smtp import smtp_receiver

PROVIDER = "Acme SSO"
ALICE = {
    "preferred_username": "alice",
    "email": "alice@research.example",
    "groups": ["research"],
}
BOB = {"preferred_username": "bob", "email": "bob@research.example", "groups": ["research"]}
CAROL = {"preferred_username": "carol", "email": "carol@other.example", "groups": []}


@pytest.fixture
def identity_provider(settings):
    """A real OpenID Connect provider; the site is configured to sign in through it."""
    with run_server_in_thread() as server:
        url = f"http://localhost:{server.server_port}"
        settings.OIDC_SERVER_URL = url
        settings.OIDC_CLIENT_ID = "researchsite"
        settings.OIDC_CLIENT_SECRET = "researchsite-client-secret"
        settings.OIDC_PROVIDER_NAME = PROVIDER
        settings.OIDC_TEAMS_CLAIM = "groups"
        yield url


def with_claims(provider: str, subject: str, claims: dict) -> None:
    """What the provider will say of `subject` (its admin API)."""
    httpx.put(f"{provider}/users/{subject}", json=claims).raise_for_status()


def sign_in(page, site: str, subject: str) -> None:
    """The whole browser flow: the site's button, the provider's page, back signed in."""
    page.goto(f"{site}/login/")
    page.get_by_role("button", name=f"Sign in with {PROVIDER}").click()
    page.wait_for_url(re.compile(r".*/oauth2/authorize.*"))
    page.locator("input[name=sub]").fill(subject)
    page.get_by_role("button", name="Authorize").click()
    page.wait_for_url(f"{site}/")


def new_browser(browser):
    return open_page(browser, viewport={"width": 1200, "height": 900})


def socket_refusal(page, site: str, chat_id: int) -> dict:
    """Open the chat's websocket from the page; return its first frame and its close code."""
    return page.evaluate(
        """(url) => new Promise((resolve) => {
            const socket = new WebSocket(url);
            let frame = null;
            socket.onmessage = (event) => { frame = JSON.parse(event.data); };
            socket.onclose = (event) => resolve({frame, code: event.code});
        })""",
        f"{site.replace('http', 'ws')}/ws/chats/{chat_id}/",
    )


def test_a_team_shares_research_through_single_sign_on(browser, site, upstream, identity_provider):
    users = get_user_model().objects
    alice_page, bob_page, carol_page = (new_browser(browser) for _ in range(3))

    # alice's first sign-in makes her account and puts her in the team "research".
    with_claims(identity_provider, "alice-sub", ALICE)
    sign_in(alice_page, site, "alice-sub")
    alice = users.get(username="alice")
    assert alice.email == "alice@research.example"
    assert alice_page.locator(".site-header .who").inner_text() == "alice"
    research = Team.objects.get(name="research")
    assert TeamMembership.objects.filter(team=research, user=alice).exists()

    # A later sign-in finds her by the provider's subject, even with another e-mail address.
    alice_page.get_by_role("button", name="Log out").click()
    with_claims(identity_provider, "alice-sub", {**ALICE, "email": "alice.m@research.example"})
    sign_in(alice_page, site, "alice-sub")
    assert list(users.filter(username__startswith="alice").values_list("pk", flat=True)) == [
        alice.pk
    ]
    assert users.get(pk=alice.pk).email == "alice.m@research.example"

    # alice asks, then shares the chat with the team.
    upstream.queue(
        Reply.events(*answer_stream("Revenue rose 12% in the quarter.", checkpoint="ckpt-shared"))
    )
    new_chat(alice_page)
    chat_id = int(alice_page.url.rstrip("/").split("/")[-1])
    ask(alice_page, "How did revenue do?")
    wait_for_answer(alice_page)
    alice_page.get_by_role("button", name="Share with team").click()
    alice_page.wait_for_url(re.compile(r".*#team-sharing$"))
    assert "Shared with the team research" in alice_page.locator("#team-sharing").inner_text()
    shared = Turn.objects.get(chat_id=chat_id)

    # bob, in "research" too, finds it on his Team page and opens it.
    with_claims(identity_provider, "bob-sub", BOB)
    sign_in(bob_page, site, "bob-sub")
    bob_page.get_by_role("link", name="Team").click()
    listed = bob_page.locator(".team-chats li").first
    assert "shared by alice" in listed.inner_text()
    listed.get_by_role("link", name="How did revenue do?").click()
    bob_page.wait_for_url(f"{site}/chats/{chat_id}/")
    assert not bob_page.locator("#composer").is_visible()
    bob_page.wait_for_function("() => document.querySelector('#connection').hidden")

    # alice asks again: bob watches the new answer stream in, live.
    upstream.queue(
        Reply.events(
            *answer_stream("Margins widened to 31% on lower costs.", checkpoint="ckpt-2"),
            pause=0.3,
        )
    )
    ask(alice_page, "And margins?")
    bob_page.locator('.turn[data-status="streaming"]').wait_for()
    answer = wait_for_answer(bob_page)
    assert "Margins widened to 31% on lower costs." in answer.inner_text()
    wait_for_answer(alice_page)

    # carol, in no team, gets a 404 for the chat, its exports and its websocket; search finds
    # nothing of it.
    with_claims(identity_provider, "carol-sub", CAROL)
    sign_in(carol_page, site, "carol-sub")
    for path in ("", "export.md", "export.json", "print/"):
        assert carol_page.request.get(f"{site}/chats/{chat_id}/{path}").status == 404, path
    refused = socket_refusal(carol_page, site, chat_id)
    assert (refused["frame"]["code"], refused["code"]) == ("not_found", 4404)
    carol_page.goto(f"{site}/chats/search/?q=revenue")
    assert "No chats match" in carol_page.locator("main").inner_text()
    bob_page.goto(f"{site}/chats/search/?q=revenue")
    assert "Team: research" in bob_page.locator(".search-hits").inner_text()

    # bob continues from the shared answer in a chat of his own.
    bob_page.goto(f"{site}/chats/{chat_id}/")
    first_answer = bob_page.locator(f"#turn-{shared.pk}")
    first_answer.get_by_role("button", name="Continue in my chats").click()
    bob_page.wait_for_url(lambda url: re.search(r"/chats/\d+/$", url) and f"/{chat_id}/" not in url)
    assert "Continues alice's chat" in bob_page.locator(".continued-from").inner_text()
    upstream.queue(Reply.events(*answer_stream("Costs fell 4%.", checkpoint="ckpt-bob")))
    asked_before = len(upstream.requests)
    ask(bob_page, "What drove the costs?")
    wait_for_answer(bob_page)
    sent = upstream.payloads[asked_before]
    assert sent["message"] == "What drove the costs?"
    assert (sent["chat_id"], sent["from_checkpoint_id"]) == (
        shared.upstream_chat_id,
        "ckpt-shared",
    )
    assert Turn.objects.filter(chat_id=chat_id).count() == 2  # alice's chat is as it was
    assert Chat.objects.get(pk=chat_id).active_turn.question == "And margins?"

    # alice, made an owner of the team, removes bob: his open page closes, his next request 404s.
    TeamMembership.objects.filter(team=research, user=alice).update(role="owner")
    bob_page.goto(f"{site}/chats/{chat_id}/")
    bob_page.wait_for_function("() => document.querySelector('#connection').hidden")
    alice_page.get_by_role("link", name="Team").click()
    alice_page.get_by_role("button", name="Remove bob").click()
    banner = bob_page.locator("#connection")
    banner.get_by_text("This chat is no longer shared with you.").wait_for(timeout=5_000)
    assert bob_page.request.get(f"{site}/chats/{chat_id}/").status == 404
    for page in (alice_page, bob_page, carol_page):
        assert page.js_errors == []
        page.context.close()


def test_a_watch_emails_its_change_to_the_address_the_provider_gave(
    browser, site, upstream, identity_provider, settings
):
    settings.WATCH_EMAIL = True
    upstream.queue(
        Reply.events(*cited_answer_stream(FIRST)), Reply.events(*cited_answer_stream(SECOND))
    )
    page = new_browser(browser)
    with_claims(identity_provider, "alice-sub", ALICE)
    sign_in(page, site, "alice-sub")
    new_chat(page)
    ask(page, "How did revenue do?")
    wait_for_answer(page).get_by_role("link", name="Watch").click()
    assert page.get_by_label("E-mail me when it changes").is_checked()  # on by default
    page.get_by_role("button", name="Watch").click()
    page.wait_for_url(re.compile(r".*/changes/$"))

    with smtp_receiver(settings) as inbox:
        call_command("run_watches", "--all")
        call_command("run_watches")  # nothing due: nothing runs, nothing is sent again
    [(recipients, message)] = inbox.messages
    assert recipients == ["alice@research.example"]  # the provider's `email` claim
    body = message.get_content()
    assert "12% → 14%" in body
    run = WatchRun.objects.get()
    assert f"/chats/{run.watch.chat_id}/turns/{run.turn_id}/compare/?a=" in body
    assert page.js_errors == []
    page.context.close()
