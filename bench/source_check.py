"""What checking cited pages adds: the answer's wait, and the CPU of checking cached pages.

    .venv/bin/python bench/source_check.py [--turns N] [--repeat N]

1. Time to `turn.finished` with SOURCE_FETCH_ENABLED off and on, in the same run, alternating:
   the real site in this process (its websocket consumer, run, event log and storage on a fresh
   SQLite file), Gemini through its official SDK against the Gemini stand-in, each answer citing
   a page of its own on a real page server that takes 0.3 s to answer. The check comes after the
   finish, so the goal is a ratio on/off of at most 1.10. The time to `turn.checked` is shown
   too (it includes the page's 0.3 s).
2. CPU (time.process_time, every thread of the process) of `check_turn_sources`, handed the
   turn and its cited answer as the run hands them, and the run's `publish_turns_checked`, for a
   turn of 40 claims citing 20 pages that are all in the cache
   (~6 KB of main text each): reading the cache, choosing the passages, checking the figures,
   storing, rendering and publishing; and the same with the pages' sentences not yet split and
   indexed in this process (their first check here).
   Goal: at most 50 ms. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere
sys.path.insert(0, str(ROOT / "bench"))

from _site import setup_django  # noqa: E402

_DB_DIR = tempfile.mkdtemp(prefix="bench-source-check-")
setup_django(
    DATABASE_URL=f"sqlite:///{_DB_DIR}/bench.sqlite3",
    REDIS_URL="",
    LOG_LEVEL="WARNING",
    DEMO_AGENT_ENABLED="false",
)

from _machine import git_commit, machine  # noqa: E402
from channels.db import database_sync_to_async  # noqa: E402
from channels.routing import URLRouter  # noqa: E402
from channels.testing import WebsocketCommunicator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from chats.agent.events import AnswerEvent, CompleteEvent, GroundingEvent  # noqa: E402
from chats.agent.providers.gemini import load_sdk  # noqa: E402
from chats.agent.transcript import Transcript  # noqa: E402
from chats.models import Chat, Turn  # noqa: E402
from chats.routing import websocket_urlpatterns  # noqa: E402
from chats.run.finishes import publish_turns_checked  # noqa: E402
from chats.run.lifespan import shut_down  # noqa: E402
from chats.run.rendering import turn_end  # noqa: E402
from chats.services import chat_create, turn_finish_many  # noqa: E402
from chats.verify.check import (  # noqa: E402
    PagesToCheck,
    check_turn_sources,
    wait_for_source_checks,
)
from citations.pages import page_sentences  # noqa: E402
from citations.references import Citation, SourceDocument  # noqa: E402
from citations.services import source_page_save  # noqa: E402
from tests.servers import serve_asgi  # noqa: E402
from tests.standins.gemini import GeminiStandIn, grounded_answer, stream  # noqa: E402
from tests.standins.pages import ARTICLE_HTML, Page, PageSite  # noqa: E402

SENTENCES = ["Revenue rose 12% to $4.1 billion.", " Gross margin widened to 38%."]
PAGE_DELAY = 0.3
GOAL_RATIO = 1.10
GOAL_CPU_MS = 50.0


async def time_to_finished(user, gemini, news, *, fetch: bool, n: int) -> tuple[float, float]:
    """Ask one question; return seconds to turn.finished, and to turn.checked (or nan)."""
    settings.SOURCE_FETCH_ENABLED = fetch
    path = f"/article/{n}"
    news.pages[path] = Page(body=ARTICLE_HTML, delay=PAGE_DELAY)
    gemini.queue(stream(*grounded_answer(SENTENCES, [(news.url + path, "news.example")])))
    chat = await database_sync_to_async(chat_create)(owner=user, provider="gemini")
    socket = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/chats/{chat.pk}/")
    socket.scope["user"] = user
    await socket.connect()
    started = time.perf_counter()
    await socket.send_json_to({"type": "ask", "message": "How did Acme do?"})
    finished = checked = float("nan")
    while True:
        frame = await socket.receive_json_from(timeout=30)
        if frame["type"] == "turn.finished":
            finished = time.perf_counter() - started
            if not fetch:
                break
        elif frame["type"] == "turn.checked":
            checked = time.perf_counter() - started
            # The page was read and the claim flagged: a check that failed would be quicker.
            assert "38% not found in its source" in frame["html"], "the page was not checked"
            break
    await socket.disconnect()
    await wait_for_source_checks()
    return finished, checked


def article(n: int) -> str:
    """About 6 KB of main text whose figures differ per page."""
    paragraphs = [
        f"Company {n} said quarterly revenue rose {n % 30 + 1}% to ${n % 9 + 1}.{n % 10} billion,"
        f" helped by demand for its cloud services in the third quarter of 2026."
    ]
    for k in range(40):
        paragraphs.append(
            f"Segment {k} of company {n} grew {k % 17 + 2}% while operating costs fell"
            f" {k % 5 + 1}.{k % 10}%, analysts at bank {k} wrote in a note to clients."
        )
    return "\n".join(paragraphs)


def checked_turn(chat: Chat, pages: int) -> PagesToCheck:
    """A stored Gemini-like turn: 2 claims per page, no passages, its pages pending; with its
    cited answer, as its run hands it to the check."""
    sentences, citations, position = [], [], 0
    for n in range(pages):
        url = f"https://news{n}.example/2026/11/results"
        source = SourceDocument(key=f"url:{url}", type="WEB", name=f"news{n}.example", url=url)
        for text in (
            f"Company {n} revenue rose {n % 30 + 1}% to ${n % 9 + 1}.{n % 10} billion. ",
            f"Its segment {n} grew {n % 17 + 2}% in the quarter. ",
        ):
            sentences.append(text)
            citations.append(Citation(start=position, end=position + len(text) - 1, source=source))
            position += len(text)
    transcript = Transcript.from_events(
        [
            AnswerEvent(content="".join(sentences)),
            GroundingEvent(citations=tuple(citations)),
            CompleteEvent(),
        ]
    )
    turn = Turn.objects.create(chat=chat, question="How did they do?")
    end = turn_end(turn.pk, transcript, Turn.Status.COMPLETE)
    (stored,) = turn_finish_many([end])
    return PagesToCheck(stored, end.rendered.cited)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=10, help="answers asked per mode")
    parser.add_argument("--repeat", type=int, default=15, help="checks of 20 cached pages")
    args = parser.parse_args()
    await database_sync_to_async(call_command)("migrate", verbosity=0)
    user = await get_user_model().objects.acreate(username="bench")
    await asyncio.to_thread(load_sdk)  # once, as a serving process does at start-up
    commit = await asyncio.to_thread(git_commit)
    print(f"commit {commit}; {machine()}")

    gemini, news = GeminiStandIn(), PageSite()
    with serve_asgi(gemini) as gemini_url, serve_asgi(news) as news_url:
        news.url = news_url
        settings.GEMINI_API_KEY = "bench-not-a-secret"
        settings.GEMINI_BASE_URL = gemini_url
        settings.SOURCE_FETCH_ALLOWED_HOSTS = [news_url.removeprefix("http://")]
        settings.SOURCE_FETCH_MAX_AGE_HOURS = 24
        await time_to_finished(user, gemini, news, fetch=True, n=-1)  # warm up
        times: dict[bool, list[float]] = {False: [], True: []}
        to_checked: list[float] = []
        for n in range(args.turns):
            for fetch in (False, True) if n % 2 else (True, False):
                finished, checked = await time_to_finished(user, gemini, news, fetch=fetch, n=n)
                times[fetch].append(finished)
                if fetch:
                    to_checked.append(checked)
    off, on = statistics.median(times[False]), statistics.median(times[True])
    ratio = on / off
    print(
        f"time to turn.finished, median of {args.turns}: fetching off {off * 1000:.0f} ms,"
        f" on {on * 1000:.0f} ms; ratio on/off {ratio:.2f} (goal <= {GOAL_RATIO:.2f}:"
        f" {'met' if ratio <= GOAL_RATIO else 'NOT met'})"
    )
    print(
        f"time to turn.checked (fetching on, page answers after {PAGE_DELAY:g} s): median"
        f" {statistics.median(to_checked) * 1000:.0f} ms"
    )

    settings.SOURCE_FETCH_ENABLED = True
    chat = await database_sync_to_async(Chat.objects.create)(owner=user, provider="gemini")
    for n in range(20):
        await database_sync_to_async(source_page_save)(
            url=f"https://news{n}.example/2026/11/results",
            final_url=f"https://news{n}.example/2026/11/results",
            status_code=200,
            content_type="text/html",
            problem="",
            text=article(n),
        )
    cpu_ms, cold_ms = [], []
    for n in range(2 * args.repeat + 1):
        check = await database_sync_to_async(checked_turn)(chat, 20)
        cold = n % 2 == 1
        if cold:  # as if the pages had not been read in this process before
            page_sentences.cache_clear()
        before = time.process_time()
        await check_turn_sources(check, publish_turns_checked)
        (cold_ms if cold else cpu_ms).append((time.process_time() - before) * 1000)
    cpu_ms = cpu_ms[1:]  # the first pays one-time imports and caches
    turn = await Turn.objects.aget(pk=check.turn.pk)
    summary = turn.answer_html.split('claim-summary">')[1].split("<")[0]
    assert summary == "40 cited claims: 40 figures found.", summary
    median = statistics.median(cpu_ms)
    print(
        f"checking 20 cached pages (40 claims), CPU per turn over {args.repeat} turns:"
        f" median {median:.1f} ms, max {max(cpu_ms):.1f} ms"
        f" (goal median <= {GOAL_CPU_MS:.0f} ms: {'met' if median <= GOAL_CPU_MS else 'NOT met'})"
    )
    print(
        f"the same with the pages' sentences not yet in memory (citations.pages.page_sentences"
        f" emptied first), over {args.repeat} turns: median {statistics.median(cold_ms):.1f} ms,"
        f" max {max(cold_ms):.1f} ms"
    )
    await shut_down()


if __name__ == "__main__":
    asyncio.run(main())
