"""The demo agent mounted in the site answers the site itself and nobody else, over real HTTP."""

from __future__ import annotations

import os
from http import HTTPStatus

import httpx
import pytest

from chats.agent.providers.bigdata import BigdataAdapter
from chats.agent.sse import parse_sse_text
from tests.processes import python_output
from tests.servers import serve_asgi

QUESTION = {"message": "How did NVIDIA do?", "research_effort": "lite"}


@pytest.fixture(scope="module")
def site_url():
    """The whole site (researchsite.asgi) with its demo agent mount, on a loopback port."""
    from researchsite.asgi import application

    with serve_asgi(application) as url:
        yield url


@pytest.fixture
def demo_url(site_url, settings):
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    settings.DEMO_AGENT_PACE = 0
    return f"{site_url}{settings.DEMO_AGENT_PATH}"


def post(url: str, **headers: str) -> httpx.Response:
    return httpx.post(url, json=QUESTION, headers=headers, trust_env=False, timeout=30)


def token_in_a_new_process(secret_key: str) -> str:
    code = "from django.conf import settings; print(settings.DEMO_AGENT_TOKEN)"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "researchsite.settings"}
    env["SECRET_KEY"] = secret_key
    return python_output(code, env).strip()


def test_every_process_with_the_same_secret_key_has_the_same_token():
    # With `uvicorn --workers N`, one worker's request can land on another worker's mount.
    first, second = token_in_a_new_process("k" * 50), token_in_a_new_process("k" * 50)
    assert first == second
    assert len(first) == 64
    assert token_in_a_new_process("j" * 50) != first


def test_the_site_token_from_loopback_is_answered(demo_url, settings):
    response = post(demo_url, **{"X-API-KEY": settings.DEMO_AGENT_TOKEN})
    assert response.status_code == HTTPStatus.OK
    events, _ = parse_sse_text(response.text, BigdataAdapter())
    assert events[-1].type == "COMPLETE"


@pytest.mark.parametrize("key", [None, "", "not-the-token"])
def test_without_the_token_it_is_refused(demo_url, key):
    headers = {} if key is None else {"X-API-KEY": key}
    response = post(demo_url, **headers)
    assert response.status_code == HTTPStatus.UNAUTHORIZED
    assert response.json() == {"detail": "Missing or invalid API key"}


def test_a_client_that_is_not_loopback_is_refused(demo_url, settings):
    # uvicorn trusts X-Forwarded-For from 127.0.0.1 (a proxy in front), so the client is remote.
    response = post(
        demo_url, **{"X-API-KEY": settings.DEMO_AGENT_TOKEN, "X-Forwarded-For": "203.0.113.7"}
    )
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert "only the site" in response.json()["detail"]


def test_a_foreign_host_is_refused(demo_url, settings):
    # What a page on another site gets through DNS rebinding: its own name in Host.
    response = post(demo_url, **{"X-API-KEY": settings.DEMO_AGENT_TOKEN, "Host": "evil.example"})
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json() == {"detail": "Host not allowed"}


def test_the_host_of_the_sites_own_agent_url_is_allowed(demo_url, settings):
    settings.ALLOWED_HOSTS = ["research.example.com"]  # a deployment names only its public host
    response = post(demo_url, **{"X-API-KEY": settings.DEMO_AGENT_TOKEN})
    assert response.status_code == HTTPStatus.OK
