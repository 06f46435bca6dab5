"""`make run` believes no X-Forwarded-For unless FORWARDED_ALLOW_IPS names the proxy.

Sign-in lock-outs count per username and address: a client that could pick its address with a
header would never be locked out. A real server process started the production way, signed in
to over HTTP with a CSRF token like a browser.
"""

from __future__ import annotations

import re
from http import HTTPStatus

import httpx
import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher

from researchsite.serve import uvicorn_args
from tests.security.conftest import PASSWORD
from tests.security.test_ws_max_size import production_server
from tests.servers import free_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def analyst(user):
    """The user, with a password hash the server process (the site's own hashers) can check."""
    user.password = PBKDF2PasswordHasher().encode(PASSWORD, "saltsaltsalt", iterations=1000)
    user.save(update_fields=["password"])
    return user


def sign_in(base: str, password: str, forwarded_for: str) -> httpx.Response:
    """The login form as a browser sends it, from a client claiming `forwarded_for`."""
    with httpx.Client(base_url=base, timeout=30) as browser:
        form = browser.get("/login/").text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
        return browser.post(
            "/login/",
            data={"username": "analyst", "password": password, "csrfmiddlewaretoken": token},
            headers={"X-Forwarded-For": forwarded_for},
        )


def test_by_default_no_forwarded_header_is_believed(settings):
    settings.FORWARDED_ALLOW_IPS = ""
    args = uvicorn_args(host="127.0.0.1", port=8000)
    assert "--no-proxy-headers" in args and "--forwarded-allow-ips" not in args

    settings.FORWARDED_ALLOW_IPS = "10.0.0.2,10.0.0.3"
    args = uvicorn_args(host="127.0.0.1", port=8000)
    assert args[args.index("--forwarded-allow-ips") + 1] == "10.0.0.2,10.0.0.3"
    assert "--proxy-headers" in args


def test_a_local_client_cannot_pick_its_address_to_escape_the_lock_out(analyst, monkeypatch):
    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)  # uvicorn reads it too
    port = free_port()
    with production_server(port) as _pid:
        base = f"http://127.0.0.1:{port}"
        for n in range(5):  # five failures, each claiming another address
            sign_in(base, "wrong-password", f"203.0.113.{n}")
        refused = sign_in(base, PASSWORD, "203.0.113.99")
    assert refused.status_code == HTTPStatus.TOO_MANY_REQUESTS


def test_behind_a_named_proxy_its_forwarded_address_counts(analyst, monkeypatch):
    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)
    port = free_port()
    with production_server(port, FORWARDED_ALLOW_IPS="127.0.0.1") as _pid:
        base = f"http://127.0.0.1:{port}"
        for _ in range(5):
            sign_in(base, "wrong-password", "203.0.113.7")
        assert sign_in(base, PASSWORD, "203.0.113.7").status_code == HTTPStatus.TOO_MANY_REQUESTS
        # Another address behind the proxy is another pair; a forged one is a clear 400.
        forged = sign_in(base, PASSWORD, "not-an-ip")
        signed_in = sign_in(base, PASSWORD, "198.51.100.4")
    assert forged.status_code == HTTPStatus.BAD_REQUEST
    assert "Your network address could not be read" in forged.text
    assert signed_in.status_code == HTTPStatus.FOUND
