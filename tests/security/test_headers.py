"""Security headers: a Content-Security-Policy on every page, HSTS only with secure cookies."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from django.test import Client
from django.urls import reverse

from chats.library.services import chat_share
from chats.models import Chat
from tests.chats.library_factories import finished_turn
from tests.security.conftest import fresh_site_settings

pytestmark = pytest.mark.django_db

EXPECTED_POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self' data:",
    "connect-src": "'self'",
    "frame-ancestors": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
    "object-src": "'none'",
}


def policy_of(response) -> dict[str, str]:
    header = response.headers["Content-Security-Policy"]
    return dict(part.strip().split(" ", 1) for part in header.split(";"))


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_superuser("reviewer", password="pw-1234-abcd")


@pytest.mark.parametrize(
    ("path", "who"),
    [
        ("/login/", None),
        ("/admin/login/", None),
        ("/", "user"),
        ("chat", "user"),
        ("/admin/", "staff"),
        ("/admin/chats/chat/", "staff"),
        ("/no-such-page/", "user"),
    ],
)
def test_every_page_carries_the_content_security_policy(request, path, who):
    client = Client()
    if who:
        user = request.getfixturevalue(who)
        client.force_login(user)
        if path == "chat":
            path = f"/chats/{Chat.objects.create(owner=user).pk}/"
    response = client.get(path)
    assert response.status_code in {HTTPStatus.OK, HTTPStatus.NOT_FOUND}, response.status_code

    policy = policy_of(response)
    assert {name: policy[name] for name in EXPECTED_POLICY} == EXPECTED_POLICY
    # Inline style attributes: only the three table alignments, each by its hash.
    assert policy["style-src-attr"].startswith("'unsafe-hashes' 'sha256-")
    assert "unsafe-inline" not in response.headers["Content-Security-Policy"]
    assert response.headers["Referrer-Policy"] == "same-origin"


def test_the_lock_out_page_carries_it_too(user):
    client = Client()
    for _ in range(5):
        response = client.post("/login/", {"username": "analyst", "password": "wrong"})
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert policy_of(response)["script-src"] == "'self'"


@pytest.mark.parametrize("secure_cookies", ["true", "false"])
def test_hsts_is_sent_only_with_secure_cookies(monkeypatch, settings, secure_cookies):
    site = fresh_site_settings(monkeypatch, SECURE_COOKIES=secure_cookies)
    settings.SECURE_HSTS_SECONDS = getattr(site, "SECURE_HSTS_SECONDS", 0)
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = getattr(site, "SECURE_HSTS_INCLUDE_SUBDOMAINS", False)

    response = Client().get("/login/", secure=True)

    if secure_cookies == "true":
        assert site.SESSION_COOKIE_SECURE
        assert response.headers["Strict-Transport-Security"] == "max-age=31536000"
    else:
        assert "Strict-Transport-Security" not in response.headers


def test_hsts_can_include_subdomains(monkeypatch):
    site = fresh_site_settings(
        monkeypatch, SECURE_COOKIES="true", SECURE_HSTS_INCLUDE_SUBDOMAINS="true"
    )
    assert site.SECURE_HSTS_INCLUDE_SUBDOMAINS is True


def test_private_pages_exports_and_the_share_page_are_not_stored(user):
    """A shared computer's browser cache, or a proxy's, must not keep anyone's research."""
    chat = Chat.objects.create(owner=user, title="Nickel")
    turn = finished_turn(chat, "Is nickel tight?", "Yes.")
    turn.structured_output = [{"metal": "nickel", "tonnes": 12}]
    turn.save(update_fields=["structured_output"])
    share = chat_share(chat=chat, user=user)
    client = Client()
    client.force_login(user)
    paths = [
        reverse("chat_list"),
        reverse("chat_detail", args=[chat.pk]),
        reverse("chat_search") + "?q=nickel",
        reverse("chat_archived"),
        reverse("output_schemas"),
        reverse("workflow_list"),
        reverse("chat_export", args=[chat.pk]),
        reverse("chat_export_json", args=[chat.pk]),
        reverse("chat_print", args=[chat.pk]),
        reverse("turn_markdown", args=[chat.pk, turn.pk]),
        reverse("turn_structured_output", args=[chat.pk, turn.pk, "csv"]),
        reverse("turn_structured_output", args=[chat.pk, turn.pk, "json"]),
        reverse("chat_shared", args=[share.token]),
    ]
    for path in paths:
        response = client.get(path)
        assert response.status_code == HTTPStatus.OK, path
        assert "no-store" in response.headers.get("Cache-Control", ""), path
