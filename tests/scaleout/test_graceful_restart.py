"""A worker that receives SIGTERM loses no answer: two processes on PostgreSQL and Redis,
10 answers streaming on one; SIGTERM to it closes its pages' sockets (1012), the pages
reconnect to the other process and resume from their cursors, every turn ends "complete",
and the stopped process exits by itself once its runs have finished."""

from __future__ import annotations

import asyncio
import signal
from contextlib import ExitStack

from django.test import Client

from chats.models import Chat, Turn
from demo_agent.scripted import Reply, ScriptedAgent, answer_stream
from tests.scaleout.pages import Page
from tests.scaleout.sites import NEEDS_SERVICES, running_site
from tests.servers import free_port, serve_asgi
from tests.waiting import wait_until

pytestmark = NEEDS_SERVICES

ANSWERS = 10
TEXT = " ".join(f"word{i}" for i in range(40))
SITE_ENV = {"AGENT_MAX_CONCURRENT_TURNS": "20", "WS_MAX_SOCKETS_PER_USER": "30"}


def test_sigterm_lets_streaming_answers_finish_on_their_pages(django_user_model, tmp_path):
    user = django_user_model.objects.create_user("analyst", password="pw-drain-1")
    chats = [Chat.objects.create(owner=user) for _ in range(ANSWERS)]
    browser = Client()
    browser.force_login(user)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"

    upstream = ScriptedAgent()
    for _ in range(ANSWERS):  # about 4 s each: they are all streaming when SIGTERM comes
        upstream.queue(Reply.events(*answer_stream(TEXT, pieces=40), pause=0.1))

    with ExitStack() as stack:
        agent = stack.enter_context(serve_asgi(upstream))
        agent_url = f"{agent}/v1/research-agent"
        log = tmp_path / "stopped.log"
        stopped = stack.enter_context(running_site(free_port(), agent_url, log, **SITE_ENV))
        other = stack.enter_context(running_site(free_port(), agent_url, **SITE_ENV))

        async def scenario() -> list[Page]:
            pages = [Page(chat.pk, cookie) for chat in chats]
            following = [
                asyncio.create_task(page.ask_then_follow(stopped.host, reconnect_to=other.host))
                for page in pages
            ]
            await asyncio.wait_for(
                asyncio.gather(*(page.streaming.wait() for page in pages)), timeout=30
            )
            stopped.process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(asyncio.gather(*following), timeout=60)
            return pages

        pages = asyncio.run(scenario())
        exit_code = stopped.process.wait(timeout=60)  # by itself: no second signal, no kill

    assert exit_code in (0, -signal.SIGTERM), stopped.log_lines()
    for page in pages:
        assert page.close_codes == [1012]  # "service restart": the page reconnects
        assert page.finished["status"] == "complete"
        assert page.seqs == list(range(1, len(page.seqs) + 1))  # nothing lost, nothing twice
        assert page.answer == TEXT
    turns = list(Turn.objects.order_by("pk"))
    assert [turn.status for turn in turns] == ["complete"] * ANSWERS
    assert all(turn.answer_text == TEXT for turn in turns)
    assert len(upstream.requests) == ANSWERS  # each ran once, in the process that was asked


def test_a_second_sigterm_ends_the_wait_and_the_turn_is_interrupted(django_user_model, tmp_path):
    user = django_user_model.objects.create_user("analyst", password="pw-drain-2")
    chat = Chat.objects.create(owner=user)
    browser = Client()
    browser.force_login(user)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    upstream = ScriptedAgent()
    long_text = " ".join(f"w{i}" for i in range(250))  # 25 s at this pace
    upstream.queue(Reply.events(*answer_stream(long_text, pieces=250), pause=0.1))

    with ExitStack() as stack:
        agent = stack.enter_context(serve_asgi(upstream))
        log = tmp_path / "site.log"
        site = stack.enter_context(running_site(free_port(), f"{agent}/v1/research-agent", log))

        async def scenario() -> Page:
            page = Page(chat.pk, cookie)
            following = asyncio.create_task(page.ask_then_follow(site.host))
            await asyncio.wait_for(page.streaming.wait(), timeout=30)
            site.process.send_signal(signal.SIGTERM)
            await wait_for_line(site, "Shutting down: waiting up to")
            site.process.send_signal(signal.SIGTERM)
            following.cancel()
            return page

        asyncio.run(scenario())
        site.process.wait(timeout=20)  # without waiting for the answer (then "complete")

    turn = Turn.objects.get(chat=chat)
    assert turn.status == Turn.Status.INTERRUPTED
    assert "Shutting down (a second signal): ending 1 running turns" in log.read_text()


async def wait_for_line(site, text: str, timeout: float = 30.0) -> None:
    await wait_until(
        lambda: any(text in line for line in site.log_lines()), timeout, f"{text!r} logged"
    )
