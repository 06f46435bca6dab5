"""The MCP server at /mcp, through the official SDK's own client over streamable HTTP, against
the real served site."""

from __future__ import annotations

import asyncio
import re

import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from chats.models import Chat, ChatSearchDocument, Turn
from tests.chats.api.conftest import CLAIMS, cited_reply, token_for
from tests.waiting import wait_until_sync

pytestmark = pytest.mark.django_db(transaction=True)


async def with_session(site: str, token: str | None, work):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60, trust_env=False) as http,
        streamable_http_client(f"{site}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await work(session)


def text_of(result) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


def test_an_mcp_client_lists_the_tools_and_gets_a_cited_answer(site, upstream, user):
    upstream.queue(cited_reply(), cited_reply())
    token = token_for(user, "ask")

    async def work(session: ClientSession):
        tools = await session.list_tools()
        answer = await session.call_tool("research", {"question": "How did NVIDIA do?"})
        chat_id = int(re.search(r"chat_id=(\d+)", text_of(answer))[1])
        follow_up = await session.call_tool(
            "research", {"question": "And its margin?", "chat_id": chat_id}
        )
        return tools, answer, follow_up

    async def search(session: ClientSession):
        return await session.call_tool("search_chats", {"query": "margin"})

    tools, answer, follow_up = asyncio.run(with_session(site, token, work))
    # The chat is indexed for search a moment after its answer is stored.
    wait_until_sync(lambda: ChatSearchDocument.objects.filter(body__icontains="margin").exists())
    found = asyncio.run(with_session(site, token, search))

    assert {tool.name for tool in tools.tools} == {"research", "search_chats"}
    research = next(tool for tool in tools.tools if tool.name == "research")
    assert set(research.input_schema["properties"]) == {"question", "agent", "chat_id"}
    assert not answer.is_error, text_of(answer)
    text = text_of(answer)
    assert text.startswith("## How did NVIDIA do?")
    assert CLAIMS[0][0] in text and "[Reuters - 2026-04-15](https://news.example/" in text
    assert "Figure check: 2 cited claims: 2 figures found" in text
    # Ordinary turns of the user's library: the follow-up continued the same chat.
    chat = Chat.objects.get()
    assert chat.owner == user
    assert list(Turn.objects.filter(chat=chat).values_list("question", flat=True)) == [
        "How did NVIDIA do?",
        "And its margin?",
    ]
    assert not follow_up.is_error and f"chat_id={chat.pk}" in text_of(follow_up)
    (hit,) = found.structured_content["result"]
    assert hit["chat_id"] == chat.pk and "margin" in hit["snippet"].lower()


def test_mcp_needs_a_token_with_ask_from_a_host_and_origin_of_the_site(site, user):
    asker = token_for(user, "ask", name="a")
    for token, status in ((None, 401), ("rsk_" + "x" * 43, 401), (token_for(user, "read"), 403)):
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        answer = httpx2.post(f"{site}/mcp", json={}, headers=headers, trust_env=False)
        assert answer.status_code == status and answer.json()["detail"], token
    for headers, status in (
        ({"Origin": "https://evil.example"}, 403),
        ({"Host": "evil.example"}, 400),  # a name rebound to this address
    ):
        headers["Authorization"] = f"Bearer {asker}"
        answer = httpx2.post(f"{site}/mcp", json={}, headers=headers, trust_env=False)
        assert answer.status_code == status and answer.json()["detail"]
