"""A Gemini answer checked against the page it cites, through the whole site: the official SDK
against the Gemini stand-in, the run, the websocket, a real page server behind a grounding-style
redirect, the page cache, and every place the stored result shows (reload, print, exports). And
what the check hands back to the run, which announces the card: the checked turn, or the turn
whose pages are stored unread when the check is stopped."""

from __future__ import annotations

import asyncio
import threading
from urllib.parse import urlsplit

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient
from django.urls import reverse

from chats.models import Turn
from chats.services import chat_create
from citations.models import Reference, SourcePage
from tests.database_thread import database_thread_queries
from tests.servers import serve_asgi
from tests.standins.gemini import GeminiStandIn, grounded_answer, serving_as_gemini, stream
from tests.standins.pages import (
    ABORT_MARKER,
    ARTICLE_HTML,
    ARTICLE_WITHOUT_MARGINS_HTML,
    MARGIN_SENTENCE,
    Page,
    gzip_bomb,
    news_site,
    read_or_abort,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

SENTENCES = ["Revenue rose 12% to $4.1 billion.", " Gross margin widened to 38%."]
ACME = ["Acme revenue rose 12% to $4.1 billion.", " Gross margin widened to 38%."]
REDIRECT = "/grounding-api-redirect/AbC123"


@pytest.fixture
def gemini(settings):
    with serving_as_gemini(settings, GeminiStandIn()) as stand_in:
        settings.AGENT_MAX_RETRIES = 0
        settings.EVENT_FLUSH_INTERVAL = 0.01
        yield stand_in


@pytest.fixture
def news(settings):
    site = news_site()
    with serve_asgi(site) as url:
        site.url = url
        site.hostport = urlsplit(url).netloc
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
    html = checked["answer_html"]
    assert "2 cited claims: 1 figure found, 1 not found." in html
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
    assert checks == ["supported", "figure not found"]

    web = AsyncClient()
    await web.aforce_login(user)
    for name in ("chat_detail", "chat_print"):
        response = await web.get(reverse(name, args=[chat.pk]))
        assert "38% not found in its source" in response.content.decode()
    markdown = (await web.get(reverse("chat_export", args=[chat.pk]))).content.decode()
    assert "> Figure check: 2 cited claims: 1 figure found, 1 not found." in markdown
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

    html = (await client.receive_until("turn.checked", turn_id=turn_id, timeout=30))[-1][
        "answer_html"
    ]
    assert news.requests == []
    assert "2 cited claims: 2 not read." in html
    assert " checked" not in html.split("claim-summary")[1].split("</p>")[0]
    assert (
        "The page could not be read (refused: 127.0.0.1 is a loopback address), so its claims"
        " are not checked."
    ) in html
    checks = [r.claim_check["status"] async for r in Reference.objects.filter(turn_id=turn_id)]
    assert checks == ["not read", "not read"]


async def test_with_fetching_off_nothing_is_fetched_and_no_claim_is_checked(
    connect, user, gemini, news, settings
):
    settings.SOURCE_FETCH_ENABLED = False
    _, client, turn_id = await ask_gemini(connect, user, gemini, news.url + REDIRECT)
    html = (await client.receive_until("turn.finished", turn_id=turn_id, timeout=30))[-1]["html"]
    assert "2 cited claims: 2 not read." in html
    assert news.requests == []


async def test_a_research_agent_source_without_chunks_is_read_and_one_with_chunks_is_not(
    user, news
):
    """Any agent: a source that came without a passage gets the page's; the agent's own
    passages are kept as they are, and the two kinds say where they come from."""
    from chats.agent.events import AnswerEvent, CompleteEvent, GroundingEvent
    from chats.verify.check import check_turn_sources, stored_pages_to_check
    from citations.references import Citation, Passage, SourceDocument

    one, two = SENTENCES[0], SENTENCES[1]
    page = SourceDocument(
        key="id:n1", type="BIGDATA", name="Example News", url=f"{news.url}/2026/11/acme-results"
    )
    chunked = SourceDocument(key="id:r1", type="BIGDATA", name="Reuters", url="https://r.example/1")
    finished = await finished_turn(
        user,
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
        ],
    )
    assert "Checking 1 source…" in finished.answer_html

    await check_turn_sources(await stored_pages_to_check(finished.pk))

    await finished.arefresh_from_db()
    html = finished.answer_html
    assert "2 cited claims: 1 figure found, 1 not found." in html
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


async def finished_turn(user, events: list) -> Turn:
    """A turn of a new chat of `user`'s, finished and stored from these events, with pages to
    read."""
    from chats.agent.transcript import Transcript
    from chats.models import Chat
    from chats.run.rendering import turn_end
    from chats.services import turn_finish_many

    chat = await Chat.objects.acreate(owner=user)
    turn = await Turn.objects.acreate(chat=chat, question="How did Acme do?")
    end = turn_end(turn.pk, Transcript.from_events(events), Turn.Status.COMPLETE)
    (finished,) = await database_sync_to_async(turn_finish_many)([end])
    assert any(read.pending for read in end.rendered.cited.pages.values())
    return finished


async def finished_turn_citing(user, url: str) -> Turn:
    """A stored turn whose one claim cites the page at `url` without a passage (to be read)."""
    from chats.agent.events import AnswerEvent, CompleteEvent, GroundingEvent
    from citations.references import Citation, SourceDocument

    claim = SENTENCES[1]
    source = SourceDocument(key=f"url:{url}", type="WEB", name="news.example", url=url)
    return await finished_turn(
        user,
        [
            AnswerEvent(content=claim),
            GroundingEvent(citations=(Citation(start=0, end=len(claim), source=source),)),
            CompleteEvent(),
        ],
    )


async def test_a_checked_turn_is_handed_to_the_caller_with_its_new_html(user, news):
    """The run announces the card: the check hands it the turn once the result is stored."""
    from chats.verify.check import (
        start_source_checks,
        stored_pages_to_check,
        wait_for_source_checks,
    )

    turn = await finished_turn_citing(user, f"{news.url}/2026/11/acme-results")
    told: list[Turn] = []

    async def on_checked(checked: list[Turn]) -> None:
        told.extend(checked)

    start_source_checks([await stored_pages_to_check(turn.pk)], on_checked)
    await wait_for_source_checks()

    (checked,) = told
    assert checked.pk == turn.pk
    assert "38% not found in its source" in checked.answer_html
    assert checked.answer_html == (await Turn.objects.aget(pk=turn.pk)).answer_html


async def finished_check_citing(user, url: str):
    """`finished_turn_citing`, with the cited answer its run would hand the check."""
    from chats.agent.events import AnswerEvent, CompleteEvent, GroundingEvent
    from chats.agent.transcript import Transcript
    from chats.models import Chat
    from chats.run.rendering import turn_end
    from chats.services import turn_finish_many
    from chats.verify.check import PagesToCheck
    from citations.references import Citation, SourceDocument

    claim = SENTENCES[1]
    source = SourceDocument(key=f"url:{url}", type="WEB", name="news.example", url=url)
    events = [
        AnswerEvent(content=claim),
        GroundingEvent(citations=(Citation(start=0, end=len(claim), source=source),)),
        CompleteEvent(),
    ]
    chat = await Chat.objects.acreate(owner=user)
    turn = await Turn.objects.acreate(chat=chat, question="How did Acme do?")
    end = turn_end(turn.pk, Transcript.from_events(events), Turn.Status.COMPLETE)
    (finished,) = await database_sync_to_async(turn_finish_many)([end])
    return PagesToCheck(finished, end.rendered.cited)


async def test_a_check_handed_its_answer_by_the_run_reads_none_of_it_back(user, news):
    """The run holds the cited answer it stored: the check reads the page cache and writes its
    result, and reads neither the turn's references nor its tool calls again."""
    from chats.verify.check import check_turn_sources

    url = f"{news.url}/2026/11/acme-results"
    await check_turn_sources(await finished_check_citing(user, url))  # the page is cached
    check = await finished_check_citing(user, url)

    queries = await database_thread_queries(lambda: check_turn_sources(check))

    assert not [q for q in queries if "citations_audittrace" in q]
    assert not [q for q in queries if '"citations_source"' in q]
    await check.turn.arefresh_from_db()
    assert "38% not found in its source" in check.turn.answer_html


async def test_checks_ending_together_are_stored_and_handed_back_together(user, news):
    """Twelve answers ending together: their cache lookups go to the database in one query;
    their results are stored as they are ready, the first at once and those ready meanwhile
    together, and each trip's turns are handed back together."""
    from chats.verify.check import check_turn_sources, start_source_checks, wait_for_source_checks

    url = f"{news.url}/2026/11/acme-results"
    await check_turn_sources(await finished_check_citing(user, url))  # the page is cached
    one = await finished_check_citing(user, url)
    twelve = [await finished_check_citing(user, url) for _ in range(12)]
    told: list[list[int]] = []

    async def on_checked(checked: list[Turn]) -> None:
        told.append([turn.pk for turn in checked])

    async def check_all(checks) -> None:
        start_source_checks(checks, on_checked)
        await wait_for_source_checks()

    alone = await database_thread_queries(lambda: check_all([one]))
    together = await database_thread_queries(lambda: check_all(twelve))

    def stores(queries: list[str]) -> int:
        return sum('UPDATE "citations_reference"' in q for q in queries)

    def lookups(queries: list[str]) -> int:
        return sum('FROM "citations_sourcepage"' in q for q in queries)

    assert (stores(alone), lookups(alone)) == (1, 1)
    assert lookups(together) == 1
    assert sorted(pk for batch in told[1:] for pk in batch) == sorted(c.turn.pk for c in twelve)
    assert len(told[1:]) == stores(together)
    assert await Turn.objects.filter(answer_html__contains="38% not found").acount() == 14


async def test_the_results_of_checks_stored_together_cost_the_queries_of_one(user, news):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from chats.verify.check import _Checked, _store_checked_many

    url = f"{news.url}/2026/11/acme-results"
    checks = [await finished_check_citing(user, url) for _ in range(13)]

    def store(items: list) -> int:
        with CaptureQueriesContext(connection) as queries:
            _store_checked_many(items)
        return len(queries.captured_queries)

    def checked(check) -> _Checked:
        return _Checked(check.turn, check.cited, f"<p>checked {check.turn.pk}</p>", None)

    alone = await database_sync_to_async(store)([checked(checks[0])])
    together = await database_sync_to_async(store)([checked(c) for c in checks[1:]])

    assert together == alone
    stored = [t async for t in Turn.objects.filter(answer_html__startswith="<p>checked ")]
    assert sorted(t.pk for t in stored) == sorted(c.turn.pk for c in checks)


class HeldPage:
    """A page server that answers only once released (from the test's thread)."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.released = threading.Event()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        self.asked.set()
        await asyncio.to_thread(self.released.wait)
        headers = [(b"content-type", b"text/html")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": ARTICLE_HTML.encode()})


async def test_a_check_stopped_while_its_page_is_read_stores_it_unread_and_says_so(user, settings):
    """The server shuts down mid-read: the turn must not say "Checking 1 source…" for ever."""
    from chats.verify.check import (
        start_source_checks,
        stop_source_checks,
        stored_pages_to_check,
    )

    page = HeldPage()
    told: list[Turn] = []

    async def on_checked(checked: list[Turn]) -> None:
        told.extend(checked)

    with serve_asgi(page) as url:
        settings.SOURCE_FETCH_ENABLED = True
        settings.SOURCE_FETCH_ALLOWED_HOSTS = [urlsplit(url).netloc]
        try:
            turn = await finished_turn_citing(user, f"{url}/article")
            start_source_checks([await stored_pages_to_check(turn.pk)], on_checked)
            await wait_until(page.asked.is_set)
            await stop_source_checks()
        finally:
            page.released.set()

    (checked,) = told
    assert "the server restarted before it was read" in checked.answer_html
    assert "Checking 1 source" not in checked.answer_html
    assert checked.answer_html == (await Turn.objects.aget(pk=turn.pk)).answer_html


# --- every page's failure stays that page's; bounded and fair ---------------------------------


async def finished_turn_citing_each(user, claims: list[tuple[str, str]]) -> Turn:
    """A stored turn of `user`'s whose claims each cite their own page without a passage."""
    from chats.agent.events import AnswerEvent, CompleteEvent, GroundingEvent
    from citations.references import Citation, SourceDocument

    answer, citations = "", []
    for claim, url in claims:
        source = SourceDocument(key=f"url:{url}", type="WEB", name="news.example", url=url)
        citations.append(Citation(start=len(answer), end=len(answer) + len(claim), source=source))
        answer += claim + " "
    return await finished_turn(
        user,
        [AnswerEvent(content=answer), GroundingEvent(citations=tuple(citations)), CompleteEvent()],
    )


async def test_a_page_killing_its_reader_a_bomb_a_rot13_charset_and_an_octal_address_say_why(
    user, news, monkeypatch
):
    """Cited beside a good page in one answer: the good page's claims are checked and cached,
    each bad page says in one line why it was not read, and this (the server's) process goes on.
    The reader is the real one, but aborts its process for the page that carries the marker."""
    from chats.verify import reading
    from chats.verify.check import check_turn_sources, stored_pages_to_check

    monkeypatch.setattr(reading, "read_page", read_or_abort)
    html = {"content-type": "text/html"}
    news.pages["/aborts"] = Page(body=ARTICLE_HTML + ABORT_MARKER.decode())
    bomb = gzip_bomb(16 * 1024**2, layers=2)
    news.pages["/bomb"] = Page(body=bomb, headers={**html, "content-encoding": "gzip, gzip"})
    news.pages["/rot13"] = Page(
        body="<p>Erirahr ebfr 12%.</p>", headers={"content-type": "text/html; charset=rot13"}
    )
    turn = await finished_turn_citing_each(
        user,
        [
            ("Revenue rose 12% to $4.1 billion.", f"{news.url}/2026/11/acme-results"),
            ("Margin widened to 31.5%.", f"{news.url}/aborts"),
            ("Costs fell 3%.", f"{news.url}/bomb"),
            ("Sales rose 9%.", f"{news.url}/rot13"),
            ("Debt fell 4%.", "http://0177.0.0.1/x"),
        ],
    )

    await check_turn_sources(await stored_pages_to_check(turn.pk))

    await turn.arefresh_from_db()
    html_text = turn.answer_html
    assert "5 cited claims: 1 figure found, 4 not read." in html_text
    for line in (
        "not read: it stopped the process reading it",
        "not read: more than one content encoding (gzip, gzip)",
        "not read: an unreadable character set (rot13)",
        "not read: refused: 0177.0.0.1 is an address written in a non-standard form",
    ):
        assert f'<p class="evidence-check evidence-check-not-read">{line}</p>' in html_text
    assert "12% and $4.1 billion found in its source" in html_text
    good = await SourcePage.objects.aget(url=f"{news.url}/2026/11/acme-results")
    assert (good.problem, MARGIN_SENTENCE in good.text) == ("", True)
    assert await SourcePage.objects.acount() == 5  # the bad pages are cached with their problem


async def test_pages_past_the_limit_of_a_turn_are_not_read_and_say_so(user, news, settings):
    from chats.verify.check import check_turn_sources, stored_pages_to_check

    settings.SOURCE_FETCH_MAX_PAGES_PER_TURN = 2
    for n in range(4):
        news.pages[f"/a{n}"] = Page(body=ARTICLE_HTML)
    turn = await finished_turn_citing_each(
        user,
        [(f"Sales of line {n} rose {n + 40}%.", f"{news.url}/a{n}") for n in range(4)],
    )
    await check_turn_sources(await stored_pages_to_check(turn.pk))

    await turn.arefresh_from_db()
    assert sorted(news.paths) == ["/a0", "/a1"]  # the first two cited, fetched at once
    assert turn.answer_html.count("not read: over the limit of 2 pages a turn") == 2
    summary = turn.answer_html.split('claim-summary">')[1].split("<")[0]
    assert summary == "4 cited claims: 2 not found, 2 not read."


class StallingPages:
    """A page server whose every request waits until released; it counts the requests it holds."""

    def __init__(self) -> None:
        self.held = 0
        self.released = threading.Event()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        self.held += 1
        await asyncio.to_thread(self.released.wait)
        headers = [(b"content-type", b"text/html")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": ARTICLE_HTML.encode()})


async def test_one_users_stalling_pages_never_hold_another_users_check(
    user, django_user_model, news, settings
):
    """48 pages that never answer in one user's answer, one fast page in another's: the second
    check is done while every one of the first user's fetches is still held, and the first user
    never holds more than their share of the slots."""
    from chats.verify.check import (
        MAX_PER_USER,
        start_source_checks,
        stored_pages_to_check,
        wait_for_source_checks,
    )

    other = await django_user_model.objects.acreate(username="other-analyst")
    stalling = StallingPages()
    told: list[int] = []

    async def on_checked(checked: list[Turn]) -> None:
        told.extend(turn.pk for turn in checked)

    with serve_asgi(stalling) as slow_url:
        settings.SOURCE_FETCH_ALLOWED_HOSTS = [news.hostport, urlsplit(slow_url).netloc]
        try:
            slow = await finished_turn_citing_each(
                user, [(f"Claim {n} rose {n}%.", f"{slow_url}/p{n}") for n in range(48)]
            )
            fast = await finished_turn_citing(other, f"{news.url}/2026/11/acme-results")
            start_source_checks([await stored_pages_to_check(slow.pk)], on_checked)
            await wait_until(lambda: stalling.held == MAX_PER_USER, what="the slow user's share")
            start_source_checks([await stored_pages_to_check(fast.pk)], on_checked)
            await wait_until(lambda: fast.pk in told, what="the other user's check")
            assert stalling.held == MAX_PER_USER  # all still held: they never blocked it
            assert slow.pk not in told
        finally:
            stalling.released.set()
        await wait_for_source_checks()
    assert told == [fast.pk, slow.pk]
    checked = await Turn.objects.aget(pk=fast.pk)
    assert "38% not found in its source" in checked.answer_html


async def test_waiting_pages_are_served_user_by_user_in_turn():
    from chats.verify.check import FairSlots

    slots = FairSlots(total=1, per_user=1)
    order: list[str] = []
    gate = asyncio.Event()

    async def page(user: str) -> None:
        async with slots.slot(user):
            order.append(user)
            await gate.wait()

    first = asyncio.create_task(page("a"))
    await wait_until(lambda: order == ["a"])
    rest = [asyncio.create_task(page(u)) for u in ["a", "a", "a", "b", "c"]]
    await wait_until(lambda: sum(len(q) for q in slots.waiting.values()) == 5)
    gate.set()
    await asyncio.gather(first, *rest)
    assert order == ["a", "b", "c", "a", "a", "a"]
    assert (slots.running, slots.running_for, slots.waiting) == (0, {}, {})


async def test_a_claim_sharing_no_word_with_its_page_is_flagged_live_and_after_a_reload(
    connect, user, reviewer, gemini, news
):
    """Gemini's "Acme revenue rose 12% to $4.1 billion. Gross margin widened to 38%." citing a
    page that states 12% and $4.1 billion and never mentions margins: the page was read, 38% is
    not on it, and that is what the check says, naming the figure; the other claim is
    supported. The states are the exports' contract."""
    news.pages["/2026/11/acme-results"] = Page(body=ARTICLE_WITHOUT_MARGINS_HTML)
    gemini.queue(stream(*grounded_answer(ACME, [(news.url + REDIRECT, "news.example")])))
    chat = await database_sync_to_async(chat_create)(owner=user, provider="gemini")
    client = await connect(user, chat)
    await client.send({"type": "ask", "message": "How did Acme do?", "research_effort": "lite"})
    turn_id = (await client.receive_until("turn.started"))[-1]["turn_id"]

    checked = (await client.receive_until("turn.checked", turn_id=turn_id, timeout=30))[-1]
    summary = "2 cited claims: 1 figure found, 1 not found."
    for html in (checked["answer_html"], (await Turn.objects.aget(pk=turn_id)).answer_html):
        assert f'<p class="claim-summary">{summary}</p>' in html
        assert (
            '<p class="evidence-check evidence-check-flagged">38% not found in its source</p>'
            in html
        )
        assert "No sentence of the page shares a word with this claim." in html
        assert "12% and $4.1 billion found in its source" in html

    web = AsyncClient()
    await web.aforce_login(user)
    page = (await web.get(reverse("chat_detail", args=[chat.pk]))).content.decode()
    assert summary in page and "38% not found in its source" in page
    exported = (await web.get(reverse("chat_export_json", args=[chat.pk]))).json()
    claims = exported["turns"][0]["claims"]
    assert [(c["check"]["status"], c["check"]["message"]) for c in claims] == [
        ("supported", "12% and $4.1 billion found in its source"),
        ("figure not found", "38% not found in its source"),
    ]
    markdown = (await web.get(reverse("chat_export", args=[chat.pk]))).content.decode()
    assert f"> Figure check: {summary}\n" in markdown
    assert (
        "> - figure not found: “Gross margin widened to 38%.” (38% not found in its source)"
        in markdown
    )

    admin = AsyncClient()
    await admin.aforce_login(reviewer)
    review = (await admin.get(reverse("admin:chats_turn_change", args=[turn_id]))).content.decode()
    assert "supported: 12% and $4.1 billion found in its source" in review
    assert "38% not found in its source" in review
    flagged = await admin.get(reverse("admin:chats_turn_changelist") + "?check=figure+not+found")
    assert f"/admin/chats/turn/{turn_id}/change/" in flagged.content.decode()
    unread = await admin.get(reverse("admin:chats_turn_changelist") + "?check=not+read")
    assert f"/admin/chats/turn/{turn_id}/change/" not in unread.content.decode()
