"""The API key goes to the agent and nowhere else: no page, no websocket frame, no log line."""

from __future__ import annotations

import logging

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.urls import reverse

from demo_agent.scripted import Reply, answer_stream

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

    def pages():
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

    for html in await sync_to_async(pages)():
        assert key not in html
