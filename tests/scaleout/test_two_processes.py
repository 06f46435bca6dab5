"""Two server processes, one PostgreSQL and one Redis: a turn asked through one process is
watched live through the other, and a turn stopped through the other stops."""

from __future__ import annotations

import asyncio
import json
from contextlib import ExitStack

from django.test import Client
from websockets.asyncio.client import connect

from chats.models import Chat, Turn
from demo_agent.scripted import Reply, ScriptedAgent, Stall, answer_stream
from tests.scaleout.sites import NEEDS_SERVICES, site_process
from tests.servers import free_port, serve_asgi

pytestmark = NEEDS_SERVICES


async def frames_until_finished(socket, turn_id=None):
    frames = []
    while True:
        frame = json.loads(await asyncio.wait_for(socket.recv(), timeout=20))
        frames.append(frame)
        if frame["type"] == "turn.finished" and (turn_id is None or frame["turn_id"] == turn_id):
            return frames


def answer_events(frames):
    return [e for f in frames if f["type"] == "turn.events" for e in f["events"]]


def test_a_turn_asked_on_one_process_is_watched_live_on_the_other(django_user_model):
    user = django_user_model.objects.create_user("analyst", password="pw-two-procs-1")
    chat = Chat.objects.create(owner=user)
    browser = Client()
    browser.force_login(user)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"

    upstream = ScriptedAgent()
    text = " ".join(f"w{i}" for i in range(60))
    upstream.queue(Reply.events(*answer_stream(text, pieces=60), pause=0.02))
    upstream.queue(
        Reply(body=[Reply.events({"type": "ANSWER", "content": "Partial"}).body[0], Stall()])
    )

    with ExitStack() as stack:
        agent = stack.enter_context(serve_asgi(upstream))
        agent_url = f"{agent}/v1/research-agent"
        one = stack.enter_context(site_process(free_port(), agent_url))
        two = stack.enter_context(site_process(free_port(), agent_url))

        async def scenario():
            headers = {"Cookie": cookie}
            path = f"/ws/chats/{chat.pk}/"
            async with (
                connect(
                    f"ws://{one}{path}", additional_headers=headers, origin=f"http://{one}"
                ) as asker,
                connect(
                    f"ws://{two}{path}", additional_headers=headers, origin=f"http://{two}"
                ) as watcher,
            ):
                await watcher.send(json.dumps({"type": "sync", "cursors": {}, "newest_turn_id": 0}))
                # A frame the watcher's page refuses is answered after its page has joined
                # the chat (a consumer handles frames once it is connected): listed, in Redis.
                await watcher.send(json.dumps({"type": "listed?"}))
                assert json.loads(await watcher.recv())["type"] == "error"
                await asker.send(
                    json.dumps({"type": "ask", "message": "Watch me", "research_effort": "lite"})
                )
                watched, asked = await asyncio.gather(
                    frames_until_finished(watcher), frames_until_finished(asker)
                )

                # A second turn, stopped through the other process.
                await asker.send(
                    json.dumps({"type": "ask", "message": "Stop me", "research_effort": "lite"})
                )
                while True:
                    frame = json.loads(await asyncio.wait_for(watcher.recv(), timeout=20))
                    if frame["type"] == "turn.events":
                        break
                await watcher.send(json.dumps({"type": "stop", "turn_id": frame["turn_id"]}))
                stopped = await frames_until_finished(watcher, frame["turn_id"])
                return watched, asked, stopped

        watched, asked, stopped = asyncio.run(scenario())

    events = answer_events(watched)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert "".join(e.get("content", "") for e in events if e["type"] == "ANSWER") == text
    assert answer_events(asked) == events
    assert watched[0]["type"] == "turn.started"
    assert watched[-1]["status"] == "complete"
    assert stopped[-1]["status"] == "stopped"
    assert len(upstream.requests) == 2  # each turn ran once, in the process that was asked

    first, second = Turn.objects.order_by("pk")
    assert (first.status, first.answer_text) == ("complete", text)
    assert (second.status, second.answer_text) == ("stopped", "Partial")
