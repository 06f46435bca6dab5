"""The API key, or the demo agent's token, goes to the agent only: no page, frame or log line.

Nor does a secret the agent echoes mid-stream: the stand-in below echoes the site's API key (and
the Django secret key, and a provider key it was never sent) in an ERROR event, a TOOL_ERROR,
its thinking and its answer, the key split across two answer deltas.
"""

from __future__ import annotations

import io
import logging

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from chats.models import Turn
from demo_agent.scripted import DEFAULT_CHAT_ID, Drop, Reply, answer_stream
from demo_agent.wire import sse_event
from tests.chats.conftest import events_of
from tests.servers import serve_asgi

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_api_key_never_leaves_the_agent_request(
    connect, user, chat, upstream, settings, caplog
):
    key = settings.BIGDATA_API_KEY
    caplog.set_level(logging.DEBUG)
    upstream.queue(Reply.error(401, f"Invalid API key {key}"))  # even if the agent echoes it
    upstream.queue(Reply.events(*answer_stream("Fine.")))
    client = await connect(user, chat)
    for question in ("first", "second"):
        await client.send({"type": "ask", "message": question, "research_effort": "lite"})
        await client.receive_until("turn.finished")

    assert upstream.requests[0].headers["x-api-key"] == key
    assert key not in str(client.frames)
    assert key not in caplog.text

    for html in await sync_to_async(pages)(user, chat):
        assert key not in html


async def test_the_demo_agent_token_never_leaves_the_agent_request(
    connect, user, chat, settings, caplog
):
    """Without a key the site sends its demo agent a token: to the agent, and nowhere else."""
    from researchsite.asgi import application

    token = settings.DEMO_AGENT_TOKEN
    settings.BIGDATA_API_KEY = ""
    settings.AGENT_MAX_RETRIES = 0
    caplog.set_level(logging.DEBUG)
    with serve_asgi(application) as url:
        settings.RESEARCH_AGENT_URL = f"{url}{settings.DEMO_AGENT_PATH}"
        client = await connect(user, chat)
        await client.send({"type": "ask", "message": "How did NVIDIA?", "research_effort": "lite"})
        finished = (await client.receive_until("turn.finished", timeout=60))[-1]

    assert finished["status"] == "complete"  # the demo agent accepted the site's token
    assert token not in str(client.frames)
    assert token not in caplog.text
    for html in await sync_to_async(pages)(user, chat):
        assert token not in html


def pages(user, chat) -> list[str]:
    """The chat list, the chat and its export, as the user's browser gets them."""
    browser = Client()
    browser.force_login(user)
    return [
        browser.get(url).content.decode()
        for url in (
            reverse("chat_list"),
            reverse("chat_detail", args=[chat.pk]),
            reverse("chat_export", args=[chat.pk]),
        )
    ]


FOREIGN_KEY = "sk-proj-" + "Q" * 40  # a provider key of another site, in the shape OpenAI uses


def echoing_run(key: str, secret_key: str) -> list[dict]:
    half = len(key) // 2
    return [
        {"type": "THINKING", "content": f"I was called with {key}."},
        {"type": "ANSWER", "message_id": "a", "content": f"Your key is {key[:half]}"},
        {"type": "ANSWER", "message_id": "a", "content": f"{key[half:]} and {FOREIGN_KEY}."},
        {"type": "TOOL_ERROR", "tool_name": "search", "error": f"denied for X-API-KEY: {key}"},
        {"type": "ANSWER", "message_id": "a", "content": f" Signed with {secret_key}."},
        {"type": "ERROR", "error": f"Upstream refused key {key} ({secret_key})"},
    ]


async def test_an_echoed_secret_reaches_no_row_frame_page_export_or_log(
    connect, user, chat, upstream, settings, caplog
):
    key = settings.BIGDATA_API_KEY
    secrets = (key, settings.SECRET_KEY, FOREIGN_KEY)
    caplog.set_level(logging.DEBUG)
    upstream.queue(Reply.events(*echoing_run(key, settings.SECRET_KEY)))
    client = await connect(user, chat)
    await client.send({"type": "ask", "message": "Which key?", "research_effort": "lite"})
    finished = (await client.receive_until("turn.finished"))[-1]

    assert finished["status"] == "failed"
    turn = await Turn.objects.aget(chat=chat)
    # The error and the answer are still there to read, with the secrets masked in place.
    assert turn.error.startswith("Upstream refused key [redacted]")
    assert turn.answer_text.startswith("Your key is [redacted]")
    sent = f"Your key is {key} and {FOREIGN_KEY}. Signed with {settings.SECRET_KEY}."
    assert len(turn.answer_text) == len(sent)  # masks keep their length: citations stay put
    assert any(e["type"] == "ERROR" for e in events_of(client.frames))

    seen = {
        "frames": str(client.frames),
        "rows": await sync_to_async(database_dump)(),
        "logs": caplog.text,
        **await sync_to_async(every_view)(user, chat),
    }
    for where, text in seen.items():
        for secret in secrets:
            assert secret not in text, f"a secret in {where}"
    assert "[redacted]" in seen["share"] and "[redacted]" in seen["export.json"]


def database_dump() -> str:
    out = io.StringIO()
    call_command("dumpdata", "chats", "citations", stdout=out)
    return out.getvalue()


def every_view(user, chat) -> dict[str, str]:
    """Every page and export of the chat, and its share page as another user opens it."""
    browser = Client()
    browser.force_login(user)
    turn = Turn.objects.get(chat=chat)
    shared = browser.post(reverse("chat_share", args=[chat.pk]), follow=True)
    assert shared.status_code == 200
    token = chat.shares.get().token
    urls = {
        "list": reverse("chat_list"),
        "chat": reverse("chat_detail", args=[chat.pk]),
        "export.md": reverse("chat_export", args=[chat.pk]),
        "export.json": reverse("chat_export_json", args=[chat.pk]),
        "print": reverse("chat_print", args=[chat.pk]),
        "answer.md": reverse("turn_markdown", args=[chat.pk, turn.pk]),
    }
    found = {name: browser.get(url).content.decode() for name, url in urls.items()}
    reader = Client()
    reader.force_login(type(user).objects.create_user("reader", password="pw-reader-123"))
    found["share"] = reader.get(reverse("chat_shared", args=[token])).content.decode()
    return found


async def test_an_answer_cut_off_keeps_the_end_held_back_for_a_possible_secret(
    connect, user, chat, upstream, settings
):
    """The end of a delta that could begin a secret waits for the next event; when the stream
    drops instead, that end is still kept, as all of an interrupted answer is."""
    key = settings.BIGDATA_API_KEY
    answer = {"type": "ANSWER", "message_id": "a", "content": f"Cut off at {key[:6]}"}
    upstream.queue(Reply(body=[sse_event(DEFAULT_CHAT_ID, answer), Drop()]))
    client = await connect(user, chat)
    await client.send({"type": "ask", "message": "Which key?", "research_effort": "lite"})
    finished = (await client.receive_until("turn.finished"))[-1]

    assert finished["status"] == "interrupted"
    turn = await Turn.objects.aget(chat=chat)
    assert turn.answer_text == f"Cut off at {key[:6]}"
