"""A server process's /metrics after two answers, and its JSON log lines (LOG_FORMAT=json):
every line one JSON object, the lines about a turn carrying its turn_id."""

from __future__ import annotations

import asyncio
import json
import re
from contextlib import ExitStack

import httpx
from django.test import Client
from websockets.asyncio.client import connect

from chats.models import Chat, Turn
from demo_agent.scripted import Reply, ScriptedAgent, answer_stream
from tests.scaleout.sites import NEEDS_SERVICES, running_site
from tests.servers import free_port, serve_asgi

pytestmark = NEEDS_SERVICES


def metric(text: str, name: str) -> float:
    """The value of one sample line, e.g. `researchsite_turns_started_total{agent="bigdata"}`."""
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert match, f"{name} is not in /metrics"
    return float(match.group(1))


async def ask_and_follow(host: str, chat_id: int, cookie: str) -> list[dict]:
    async with connect(
        f"ws://{host}/ws/chats/{chat_id}/",
        additional_headers={"Cookie": cookie},
        origin=f"http://{host}",
    ) as socket:
        await socket.send(json.dumps({"type": "ask", "message": "Q", "research_effort": "lite"}))
        frames = []
        while True:
            frame = json.loads(await asyncio.wait_for(socket.recv(), timeout=20))
            frames.append(frame)
            if frame["type"] == "turn.finished":
                return frames


def test_metrics_count_two_answers_and_json_logs_name_their_turns(django_user_model, tmp_path):
    user = django_user_model.objects.create_user("analyst", password="pw-metrics-1")
    chats = [Chat.objects.create(owner=user) for _ in range(2)]
    browser = Client()
    browser.force_login(user)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    upstream = ScriptedAgent()
    for _ in chats:
        upstream.queue(Reply.events(*answer_stream("Counted answer text", pieces=3), pause=0.02))

    with ExitStack() as stack:
        agent = stack.enter_context(serve_asgi(upstream))
        log = tmp_path / "site.log"
        site = stack.enter_context(
            running_site(free_port(), f"{agent}/v1/research-agent", log, LOG_FORMAT="json")
        )
        relayed = 0
        for chat in chats:
            frames = asyncio.run(ask_and_follow(site.host, chat.pk, cookie))
            assert frames[-1]["status"] == "complete"
            relayed += sum(len(f["events"]) for f in frames if f["type"] == "turn.events")
        text = httpx.get(f"http://{site.host}/metrics", timeout=10).text  # from 127.0.0.1

    agent_label = 'agent="bigdata"'
    assert metric(text, f"researchsite_turns_started_total{{{agent_label}}}") >= 2
    finished = f'researchsite_turns_finished_total{{{agent_label},status="complete"}}'
    assert metric(text, finished) >= 2
    assert metric(text, "researchsite_events_relayed_total") >= relayed > 0
    assert metric(text, "researchsite_event_delay_seconds_count") >= 2
    assert 'researchsite_event_delay_seconds_bucket{le="0.1"}' in text
    assert metric(text, "researchsite_streaming_turns") == 0
    assert metric(text, "researchsite_event_log_flush_seconds_count") >= 2

    records = [json.loads(line) for line in site.log_lines()]  # every line is JSON
    turn_ids = {turn.pk for turn in Turn.objects.all()}
    about_turns = [r for r in records if r["logger"].startswith("chats.run.")]
    assert {r.get("turn_id") for r in about_turns} == turn_ids
    assert all(r["agent"] == "bigdata" and r["user_id"] == user.pk for r in about_turns)
