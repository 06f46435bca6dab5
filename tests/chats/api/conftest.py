"""Fixtures of the API tests: the whole site served by uvicorn (its lifespan on), the scripted
stand-in agent behind it, tokens, and an httpx client holding one."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from channels.layers import channel_layers

from chats.api.services import api_token_create
from demo_agent.scripted import Reply, cited_answer_stream
from tests.servers import serve_asgi

CLAIMS = [
    ("NVIDIA's data center revenue rose 12% to $41.1 billion.", "Reuters"),
    ("Gross margin was 72.4%.", "Bloomberg"),
]


def cited_reply(claims=CLAIMS, *, pause: float = 0.0) -> Reply:
    """The stand-in's answer: a few events, then the cited answer (its sentences' sources)."""
    return Reply.events(
        {"type": "PLANNING", "plan": {"title": "Plan", "steps": [{"description": "Look"}]}},
        {"type": "ACTION", "tool_name": "search", "tool_arguments": {"query": "NVIDIA"}},
        *cited_answer_stream(claims),
        pause=pause,
    )


@pytest.fixture
def site(transactional_db, settings, upstream) -> Iterator[str]:
    """The site (researchsite.asgi) on a free port, asking the scripted stand-in."""
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
    from researchsite.asgi import application

    channel_layers.backends.clear()  # the server thread's loop gets a layer of its own
    with serve_asgi(application, lifespan="on") as url:
        yield url
    channel_layers.backends.clear()


def token_for(user, *scopes: str, name: str = "script", **fields) -> str:
    _, raw = api_token_create(owner=user, name=name, scopes=scopes or ("read", "ask"), **fields)
    return raw


def api_client(site: str, token: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=f"{site}/api/v1", headers=headers, timeout=30, trust_env=False)


@pytest.fixture
def client(site, user) -> Iterator[httpx.Client]:
    """The user's client, with a read and ask token."""
    with api_client(site, token_for(user)) as http:
        yield http
