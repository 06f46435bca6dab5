"""Fixtures of the API tests: tokens, and an httpx client holding one, for the served site
(`site`, tests/chats/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from chats.api.services import api_token_create
from demo_agent.scripted import Reply, cited_answer_stream

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


def token_for(user, *scopes: str, name: str = "script", **fields) -> str:
    _, raw = api_token_create(owner=user, name=name, scopes=scopes or ("read", "ask"), **fields)
    return raw


def api_client(site: str, token: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=f"{site}/api/v1", headers=headers, timeout=30, trust_env=False)


@pytest.fixture
def api(site, user) -> Iterator[httpx.Client]:
    """The user's client, with a read and ask token."""
    with api_client(site, token_for(user)) as http:
        yield http
