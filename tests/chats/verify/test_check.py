"""A Gemini answer checked against the page it cites, through the whole site: the official SDK
against the Gemini stand-in, the run, the websocket, a real page server behind a grounding-style
redirect, the page cache, and every place the stored result shows (reload, print, exports)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient
from django.urls import reverse

from chats.models import Turn
from chats.services import chat_create
from citations.models import Reference, SourcePage
from tests.servers import serve_asgi
from tests.standins.gemini import GeminiStandIn, grounded_answer, stream
from tests.standins.pages import MARGIN_SENTENCE, news_site

pytestmark = pytest.mark.django_db(transaction=True)

SENTENCES = ["Revenue rose 12% to $4.1 billion.", " Gross margin widened to 38%."]
REDIRECT = "/grounding-api-redirect/AbC123"


@pytest.fixture
def gemini(settings):
    stand_in = GeminiStandIn()
    with serve_asgi(stand_in) as url:
        settings.GEMINI_API_KEY = "gemini-test-key-not-secret"
        settings.GEMINI_BASE_URL = url
        settings.AGENT_MAX_RETRIES = 0
        settings.EVENT_FLUSH_INTERVAL = 0.01
        yield stand_in


@pytest.fixture
def news(settings):
    site = news_site()
    with serve_asgi(site) as url:
        site.url = url
        settings.SOURCE_FETCH_ENABLED = True
        settings.SOURCE_FETCH_ALLOWED_HOSTS = [urlsplit(url).netloc]
        yield site


async def ask_gemini(connect, user, gemini, page_url: str):
    gemini.queue(stream(*grounded_answer(SENTENCES, [(page_url, "news.example")])))
    chat = await database_sync_to_async(chat_create)(owner=user, provider="gemini")
    client = await connect(user, chat)
    await client.send({"type": "ask", "message": "How did Acme do?", "research_effort": "lite"})
    started = (await client.receive_until("turn.started"))[-1]
    return chat, client, started["turn_id"]


async def test_the_claim_whose_figure_the_page_lacks_is_flagged_live_and_stored(
    connect, user, reviewer, gemini, news
):
    chat, client, turn_id = await ask_gemini(connect, user, gemini, news.url + REDIRECT)

    finished = (await client.receive_until("turn.finished", turn_id=turn_id, timeout=30))[-1]
    assert "Checking 1 source…" in finished["html"]
    checked = (await client.receive_until("turn.checked", turn_id=turn_id, timeout=30))[-1]
    html = checked["html"]
    assert "2 cited claims: 1 checked, 1 figure not found in its source." in html
    assert "38% not found in its source" in html
    assert "12% and $4.1 billion found in its source" in html
    # The passage is the page's own sentence (its words shared with the claim marked).
    assert MARGIN_SENTENCE in html.replace("<mark>", "").replace("</mark>", "")
    assert "From the page, fetched" in html
    final = f"{news.url}/2026/11/acme-results"
    assert f'href="{final}"' in html
    assert news.paths == [REDIRECT, "/2026/11/acme-results"]

    # Stored with the turn: a reload, the print page and the exports show the same.
    turn = await Turn.objects.aget(pk=turn_id)
    assert "38% not found in its source" in turn.answer_html
    assert turn.answer_html in html
    page = await SourcePage.objects.aget()
    assert (page.final_url, page.problem) == (final, "")
    checks = [r.claim_check["status"] async for r in Reference.objects.filter(turn_id=turn_id)]
    assert checks == ["supported", "figure_not_found"]

    web = AsyncClient()
    await web.aforce_login(user)
    for name in ("chat_detail", "chat_print"):
        response = await web.get(reverse(name, args=[chat.pk]))
        assert "38% not found in its source" in response.content.decode()
    markdown = (await web.get(reverse("chat_export", args=[chat.pk]))).content.decode()
    assert (
        "> Figure check: 2 cited claims: 1 checked, 1 figure not found in its source." in markdown
    )
    exported = (await web.get(reverse("chat_export_json", args=[chat.pk]))).json()
    assert "38% not found in its source" in str(exported)

    admin = AsyncClient()
    await admin.aforce_login(reviewer)
    review = await admin.get(reverse("admin:chats_turn_change", args=[turn_id]))
    assert "38% not found in its source" in review.content.decode()
    assert f"fetched {page.fetched_at.date().isoformat()}: {final}" in review.content.decode()
    pages = await admin.get(reverse("admin:citations_sourcepage_changelist"))
    assert final in pages.content.decode()


async def test_a_page_cited_again_comes_from_the_cache(connect, user, gemini, news):
    for _ in range(2):
        _, client, turn_id = await ask_gemini(connect, user, gemini, news.url + REDIRECT)
        await client.receive_until("turn.checked", turn_id=turn_id, timeout=30)
    assert news.paths == [REDIRECT, "/2026/11/acme-results"]  # fetched once
    assert await SourcePage.objects.acount() == 1


async def test_a_private_source_is_never_requested_and_its_claims_are_not_checked(
    connect, user, gemini, news, settings
):
    settings.SOURCE_FETCH_ALLOWED_HOSTS = []
    _, client, turn_id = await ask_gemini(connect, user, gemini, news.url + REDIRECT)

    html = (await client.receive_until("turn.checked", turn_id=turn_id, timeout=30))[-1]["html"]
    assert news.requests == []
    assert "2 cited claims: 2 without a passage to check." in html
    assert " checked" not in html.split("claim-summary")[1].split("</p>")[0]
    assert (
        "The page could not be read (refused: 127.0.0.1 is a loopback address), so its claims"
        " are not checked."
    ) in html
    checks = [r.claim_check["status"] async for r in Reference.objects.filter(turn_id=turn_id)]
    assert checks == ["no_passage", "no_passage"]


async def test_with_fetching_off_nothing_is_fetched_and_no_claim_is_checked(
    connect, user, gemini, news, settings
):
    settings.SOURCE_FETCH_ENABLED = False
    _, client, turn_id = await ask_gemini(connect, user, gemini, news.url + REDIRECT)
    html = (await client.receive_until("turn.finished", turn_id=turn_id, timeout=30))[-1]["html"]
    assert "2 cited claims: 2 without a passage to check." in html
    assert news.requests == []


async def test_a_research_agent_source_without_chunks_is_read_and_one_with_chunks_is_not(
    user, news
):
    """Any agent: a source that came without a passage gets the page's; the agent's own
    passages are kept as they are, and the two kinds say where they come from."""
    from chats.agent.events import AnswerEvent, CompleteEvent, GroundingEvent
    from chats.agent.transcript import Transcript
    from chats.models import Chat
    from chats.services import TurnEnd, turn_finish_many
    from chats.verify.check import check_turn_sources
    from citations.references import Citation, Passage, SourceDocument

    one, two = SENTENCES[0], SENTENCES[1]
    page = SourceDocument(
        key="id:n1", type="BIGDATA", name="Example News", url=f"{news.url}/2026/11/acme-results"
    )
    chunked = SourceDocument(key="id:r1", type="BIGDATA", name="Reuters", url="https://r.example/1")
    transcript = Transcript.from_events(
        [
            AnswerEvent(content=one + two),
            GroundingEvent(
                citations=(
                    Citation(
                        start=0,
                        end=len(one),
                        source=chunked,
                        passages=(Passage("Quarterly revenue rose 12 percent to $4.1bn."),),
                    ),
                    Citation(start=len(one) + 1, end=len(one + two), source=page),
                )
            ),
            CompleteEvent(),
        ]
    )
    chat = await Chat.objects.acreate(owner=user)
    turn = await Turn.objects.acreate(chat=chat, question="How did Acme do?")
    end = TurnEnd(turn.pk, transcript, Turn.Status.COMPLETE)
    (finished,) = await database_sync_to_async(turn_finish_many)([end])
    assert finished.pages_to_check
    assert "Checking 1 source…" in finished.answer_html

    await check_turn_sources(turn.pk)

    await turn.arefresh_from_db()
    html = turn.answer_html
    assert "2 cited claims: 1 checked, 1 figure not found in its source." in html
    assert "The passage the agent cited" in html
    assert "From the page, fetched" in html
    assert news.paths == ["/2026/11/acme-results"]  # the chunked source's page is not fetched


async def test_a_page_that_missed_the_result_gets_it_when_it_syncs_the_checking_turn(
    connect, user, gemini, news
):
    """chat.js sends a sync naming the finished turns whose card still says "Checking…"."""
    from chats.verify.check import wait_for_source_checks

    chat, client, turn_id = await ask_gemini(connect, user, gemini, news.url + REDIRECT)
    finished = (await client.receive_until("turn.finished", turn_id=turn_id, timeout=30))[-1]
    assert "claim-summary-pending" in finished["html"]
    await client.close()  # the socket drops while the page is read
    await wait_for_source_checks()

    again = await connect(user, chat)
    await again.send({"type": "sync", "cursors": {str(turn_id): 0}, "newest_turn_id": turn_id})
    card = (await again.receive_until("turn.finished", turn_id=turn_id))[-1]
    assert "38% not found in its source" in card["html"]
    assert "claim-summary-pending" not in card["html"]
