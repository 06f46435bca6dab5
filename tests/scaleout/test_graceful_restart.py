"""A worker that receives SIGTERM loses no answer: two processes on PostgreSQL and Redis,
10 answers streaming on one; SIGTERM to it closes its pages' sockets (1012), the pages
reconnect to the other process and resume from their cursors, every turn ends "complete",
and the stopped process exits by itself once its runs have finished."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from contextlib import ExitStack

import pytest
from django.test import Client
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from chats.models import Chat, Turn
from demo_agent.scripted import Reply, ScriptedAgent, answer_stream
from tests.scaleout.sites import running_site
from tests.servers import free_port, serve_asgi

pytestmark = [
    pytest.mark.scaleout,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not (
            os.environ.get("TEST_DATABASE_URL", "").startswith("postgres")
            and os.environ.get("REDIS_URL")
        ),
        reason="needs TEST_DATABASE_URL=postgres://… and REDIS_URL (make test-services runs it)",
    ),
]

ANSWERS = 10
TEXT = " ".join(f"word{i}" for i in range(40))
SITE_ENV = {"AGENT_MAX_CONCURRENT_TURNS": "20", "WS_MAX_SOCKETS_PER_USER": "30"}


class Page:
    """A chat page as chat.js behaves: ask, follow the turn, and on a dropped socket reconnect
    (here: to whichever address `reconnect_to` names, as the proxy would) and sync cursors."""

    def __init__(self, chat_id: int, cookie: str) -> None:
        self.chat_id = chat_id
        self.cookie = cookie
        self.turn_id = 0
        self.cursor = 0
        self.seqs: list[int] = []
        self.answer = ""
        self.streaming = asyncio.Event()
        self.close_codes: list[int | None] = []
        self.finished: dict = {}

    def _socket(self, host: str):
        return connect(
            f"ws://{host}/ws/chats/{self.chat_id}/",
            additional_headers={"Cookie": self.cookie},
            origin=f"http://{host}",
        )

    async def _follow(self, socket) -> bool:
        """Read frames until the turn finishes (True) or the socket closes (False)."""
        try:
            while True:
                frame = json.loads(await asyncio.wait_for(socket.recv(), timeout=30))
                if frame["type"] == "turn.started":
                    self.turn_id = frame["turn_id"]
                elif frame["type"] == "turn.events" and frame["turn_id"] == self.turn_id:
                    for event in frame["events"]:
                        if event["seq"] <= self.cursor:
                            continue  # seen before the reconnect
                        self.seqs.append(event["seq"])
                        self.cursor = event["seq"]
                        self.answer += event.get("content", "") if event["type"] == "ANSWER" else ""
                    self.streaming.set()
                elif frame["type"] == "turn.finished" and frame["turn_id"] == self.turn_id:
                    self.finished = frame
                    return True
        except ConnectionClosed as closed:
            self.close_codes.append(closed.rcvd.code if closed.rcvd else None)
            return False

    async def ask_then_follow(self, first: str, reconnect_to: str) -> None:
        async with self._socket(first) as socket:
            await socket.send(
                json.dumps({"type": "ask", "message": "Q", "research_effort": "lite"})
            )
            if await self._follow(socket):
                return
        async with self._socket(reconnect_to) as socket:
            sync = {"cursors": {str(self.turn_id): self.cursor}, "newest_turn_id": self.turn_id}
            await socket.send(json.dumps({"type": "sync", **sync}))
            assert await self._follow(socket), "the turn did not finish after the reconnect"


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
                asyncio.create_task(page.ask_then_follow(stopped.host, other.host))
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
