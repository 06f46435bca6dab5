"""The websocket accepts only the site's own origin and CSRF_TRUSTED_ORIGINS (researchsite.origins).

Each case runs through the real ASGI application (origin check, session auth, router, consumer),
signed in, so "accepted" means the page reached the user's chat.
"""

from __future__ import annotations

import pytest
from channels.testing import WebsocketCommunicator
from django.http import HttpRequest
from django.middleware.csrf import CsrfViewMiddleware

from researchsite.origins import origin_allowed
from tests.chats.conftest import fresh_channel_layer  # noqa: F401  (autouse: a layer per test)

pytestmark = pytest.mark.django_db(transaction=True)

SITE = "127.0.0.1:8000"


async def open_socket(chat, cookie: str, *, origin: str | None, host: str = SITE, scheme="ws"):
    """Open the chat's websocket on the real application; return (accepted, communicator)."""
    from researchsite.asgi import application

    headers = [(b"host", host.encode()), (b"cookie", cookie.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    communicator = WebsocketCommunicator(application, f"/ws/chats/{chat.pk}/", headers=headers)
    communicator.scope["scheme"] = scheme
    connected, _ = await communicator.connect(timeout=5)
    return connected, communicator


async def assert_reaches_the_chat(chat, cookie, **request):
    connected, communicator = await open_socket(chat, cookie, **request)
    try:
        assert connected
        await communicator.send_to(text_data="not json")  # only a signed-in owner gets a reply
        frame = await communicator.receive_json_from(timeout=5)
        assert frame["type"] == "error"
    finally:
        await communicator.disconnect()


async def assert_refused(chat, cookie, **request):
    connected, communicator = await open_socket(chat, cookie, **request)
    await communicator.disconnect()
    assert not connected


async def test_the_sites_own_origin_is_accepted(chat, session_cookie):
    await assert_reaches_the_chat(chat, session_cookie, origin=f"http://{SITE}")


async def test_the_sites_own_origin_over_tls_is_accepted(chat, session_cookie):
    await assert_reaches_the_chat(chat, session_cookie, origin=f"https://{SITE}", scheme="wss")


@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1:9999",  # another port of the same host
        f"https://{SITE}",  # another scheme (the socket is plain ws)
        "http://127.0.0.1",  # the default port is another port
        "http://localhost:8000",  # another allowed host name is another origin
        "http://evil.example:8000",
        "null",  # sandboxed frames and file: pages
        "",
    ],
)
async def test_foreign_origins_are_refused(chat, session_cookie, origin):
    await assert_refused(chat, session_cookie, origin=origin)


async def test_a_missing_origin_is_refused(chat, session_cookie):
    await assert_refused(chat, session_cookie, origin=None)


async def test_a_host_outside_allowed_hosts_is_refused_even_when_it_matches(chat, session_cookie):
    # DNS rebinding: evil.example resolves to the site, so Host and Origin agree.
    await assert_refused(
        chat, session_cookie, origin="http://evil.example:8000", host="evil.example:8000"
    )


async def test_trusted_origins_are_accepted(chat, session_cookie, settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://research.example.com", "https://*.corp.example"]
    await assert_reaches_the_chat(chat, session_cookie, origin="https://research.example.com")
    await assert_reaches_the_chat(chat, session_cookie, origin="https://desk.corp.example")
    await assert_refused(chat, session_cookie, origin="http://research.example.com")
    await assert_refused(chat, session_cookie, origin="http://desk.corp.example")
    await assert_refused(chat, session_cookie, origin="https://corp.example.evil")


# --- The same rule as Django's CSRF origin check ---------------------------------------------

CASES = [
    # (origin, host, secure)
    ("http://127.0.0.1:8000", "127.0.0.1:8000", False),
    ("https://127.0.0.1:8000", "127.0.0.1:8000", True),
    ("https://127.0.0.1:8000", "127.0.0.1:8000", False),
    ("http://127.0.0.1:8000", "127.0.0.1:8000", True),
    ("http://127.0.0.1:9999", "127.0.0.1:8000", False),
    ("http://127.0.0.1", "127.0.0.1", False),
    ("http://127.0.0.1", "127.0.0.1:80", False),
    ("http://evil.example", "evil.example", False),
    ("http://LOCALHOST:8000", "LOCALHOST:8000", False),
    ("https://research.example.com", "127.0.0.1:8000", False),
    ("https://research.example.com:8443", "127.0.0.1:8000", False),
    ("https://a.corp.example", "127.0.0.1:8000", False),
    ("https://a.b.corp.example", "127.0.0.1:8000", False),
    ("https://corp.example", "127.0.0.1:8000", False),
    ("http://a.corp.example", "127.0.0.1:8000", False),
    ("https://a.corp.example:444", "127.0.0.1:8000", False),
    ("null", "127.0.0.1:8000", False),
    ("http://[::1]:8000", "[::1]:8000", False),
    ("http://[", "127.0.0.1:8000", False),
]


@pytest.mark.parametrize(("origin", "host", "secure"), CASES)
def test_the_rule_is_djangos_csrf_origin_check(settings, origin, host, secure):
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]
    settings.CSRF_TRUSTED_ORIGINS = ["https://research.example.com", "https://*.corp.example"]
    request = HttpRequest()
    request.META = {"HTTP_ORIGIN": origin, "HTTP_HOST": host}
    request.is_secure = lambda: secure
    django_says = CsrfViewMiddleware(lambda request: None)._origin_verified(request)

    assert origin_allowed(origin=origin, host=host, secure=secure) is django_says
