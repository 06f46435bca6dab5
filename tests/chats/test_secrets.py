"""The API key, or the demo agent's token, goes to the agent only: no page, frame or log line."""

from __future__ import annotations

import logging

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.urls import reverse

from demo_agent.scripted import Reply, answer_stream
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
