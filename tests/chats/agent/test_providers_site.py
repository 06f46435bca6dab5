"""Every provider through the whole site: the official SDK (or HTTP client) against a real
stand-in replaying the provider's capture, the run, the event log, storage and the cited answer."""

from __future__ import annotations

import json
import os

import pytest
from channels.db import database_sync_to_async

from chats.agent.providers import agent_choices, default_agent
from chats.models import Chat, Turn, TurnEvent
from chats.services import chat_create
from citations.render import render_markdown
from citations.selectors import cited_answer_for_turn
from demo_agent.scripted import Reply, ScriptedAgent
from tests.processes import python_output
from tests.servers import serve_asgi

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "sk-test-not-a-secret-ZZZZ"
CAPTURES = {
    "gemini": "gemini.sse",
    "xai": "xai.sse",
    "openai": "openai.sse",
    "anthropic": "anthropic.sse",
    "llm-sdk": "llm-sdk.jsonl",
}


def configure(settings, provider: str, url: str) -> None:
    """Point the provider at the stand-in, as an operator would with its variables."""
    settings.AGENT_MAX_RETRIES = 0
    settings.EVENT_FLUSH_INTERVAL = 0.01
    if provider == "llm-sdk":
        settings.LLMSDK_AGENT_URL, settings.LLMSDK_AGENT_TOKEN = f"{url}/agent", KEY
        return
    prefix = provider.upper()
    setattr(settings, f"{prefix}_API_KEY", KEY)
    setattr(
        settings, f"{prefix}_BASE_URL", url if provider in {"gemini", "anthropic"} else f"{url}/v1"
    )


def capture_reply(path) -> Reply:
    kind = "application/x-ndjson" if path.suffix == ".jsonl" else "text/event-stream"
    return Reply(body=[path.read_bytes()], headers={"Content-Type": kind})


async def ask(client, message: str) -> int:
    await client.send({"type": "ask", "message": message, "research_effort": "standard"})
    started = (await client.receive_until("turn.started"))[-1]
    return started["turn_id"]


@pytest.mark.parametrize("provider", CAPTURES)
async def test_each_provider_answers_with_its_footnotes_through_the_site(
    provider, connect, user, settings, provider_fixtures_dir, caplog
):
    capture = provider_fixtures_dir / CAPTURES[provider]
    expected = capture.with_suffix(".md").read_text(encoding="utf-8")
    stand_in = ScriptedAgent()
    with serve_asgi(stand_in) as url:
        configure(settings, provider, url)
        stand_in.queue(capture_reply(capture), capture_reply(capture))
        chat = await database_sync_to_async(chat_create)(owner=user, provider=provider)
        assert chat.provider == provider
        client = await connect(user, chat)

        first = await ask(client, "What happened?")
        frames = await client.receive_until("turn.finished", turn_id=first, timeout=30)
        turn = await Turn.objects.aget(pk=first)
        assert (turn.status, turn.error) == (Turn.Status.COMPLETE, "")
        cited = await database_sync_to_async(cited_answer_for_turn)(turn)
        assert render_markdown(cited) == expected
        assert 'class="footnote-ref"' in turn.answer_html
        assert await TurnEvent.objects.filter(turn=turn).acount() > 0

        # A follow-up sends the branch so far: this provider keeps no conversation for us.
        second = await ask(client, "And then?")
        frames += await client.receive_until("turn.finished", turn_id=second, timeout=30)
        sent = json.dumps(stand_in.requests[1].json, ensure_ascii=False)
        assert "What happened?" in sent and turn.answer_text[:20] in sent
        assert "And then?" in sent

    # The key went to the provider, and nowhere else.
    assert any(KEY in " ".join(r.headers.values()) for r in stand_in.requests)
    assert KEY not in json.dumps(frames) and KEY not in caplog.text


async def test_a_provider_that_fails_ends_the_turn_with_the_same_kind_of_message(
    connect, user, settings
):
    stand_in = ScriptedAgent()
    with serve_asgi(stand_in) as url:
        configure(settings, "anthropic", url)
        body = {"type": "error", "error": {"type": "authentication_error", "message": "bad key"}}
        stand_in.queue(
            Reply(status=401, body=[json.dumps(body)], headers={"Content-Type": "application/json"})
        )
        chat = await database_sync_to_async(chat_create)(owner=user, provider="anthropic")
        client = await connect(user, chat)
        turn_id = await ask(client, "Hello?")
        await client.receive_until("turn.finished", turn_id=turn_id, timeout=30)
    turn = await Turn.objects.aget(pk=turn_id)
    assert turn.status == Turn.Status.FAILED
    assert "ANTHROPIC_API_KEY" in turn.error and KEY not in turn.error


def test_only_configured_agents_are_offered_and_the_default_falls_back(settings, user):
    settings.GEMINI_API_KEY = settings.OPENAI_API_KEY = settings.XAI_API_KEY = ""
    settings.ANTHROPIC_API_KEY = settings.LLMSDK_AGENT_URL = ""
    settings.DEFAULT_AGENT = "gemini"
    assert [name for name, _ in agent_choices()] == ["bigdata"]
    assert default_agent() == "bigdata"
    assert chat_create(owner=user, provider="gemini").provider == "bigdata"  # not offered

    settings.GEMINI_API_KEY = KEY
    settings.LLMSDK_AGENT_URL = "http://127.0.0.1:9/agent"
    assert [name for name, _ in agent_choices()] == ["bigdata", "gemini", "llm-sdk"]
    assert default_agent() == "gemini"
    assert chat_create(owner=user).provider == "gemini"
    assert chat_create(owner=user, provider="llm-sdk").provider == "llm-sdk"


def test_listing_the_agents_imports_no_sdk():
    """The SDKs load when a chat first asks their agent, not when the site starts or a page
    lists the agents: importing openai and anthropic put ~150,000 objects on the heap that every
    full garbage collection walked again, mid-stream (docs/PERFORMANCE.md,
    "The garbage collector's settings")."""
    script = (
        "import sys, django; django.setup()\n"
        "import researchsite.asgi\n"
        "from chats.agent.providers import agent_choices\n"
        "assert len(agent_choices()) == 6, agent_choices()\n"
        "print(sorted({'openai', 'anthropic', 'google.genai'} & set(sys.modules)))\n"
    )
    keys = ("GEMINI_API_KEY", "OPENAI_API_KEY", "XAI_API_KEY", "ANTHROPIC_API_KEY")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    env.update({name: KEY for name in keys}, LLMSDK_AGENT_URL="http://127.0.0.1:9/agent")
    assert python_output(script, env).strip() == "[]"


def test_the_new_chat_form_offers_the_agents_and_keeps_the_choice(client, user, settings):
    settings.GEMINI_API_KEY = KEY
    client.force_login(user)
    page = client.get("/").content.decode()
    assert "Agent" in page and 'value="gemini"' in page and KEY not in page
    response = client.post("/chats/new/", {"agent": "gemini"})
    chat = Chat.objects.get(pk=int(response["Location"].strip("/").split("/")[-1]))
    assert chat.provider == "gemini"
    assert "Agent: Google Gemini" in client.get(response["Location"]).content.decode()
