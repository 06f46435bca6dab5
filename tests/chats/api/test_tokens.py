"""API tokens: stored hashed, shown once, last use written at most once a minute, revoked and
expired ones refused; the `api_token` command; the admin; the page's isolation; no token in a
log line."""

from __future__ import annotations

import hashlib
import io
import logging
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import Client as BrowserClient
from django.urls import reverse
from django.utils import timezone

from chats.api.models import ApiToken
from chats.api.services import TokenError, api_token_authenticate, api_token_create

pytestmark = pytest.mark.django_db


def test_a_token_is_stored_as_its_sha256_only(user):
    token, raw = api_token_create(owner=user, name="script", scopes=["ask", "read"])
    assert raw.startswith("rsk_") and len(raw) == 47
    assert token.digest == hashlib.sha256(raw.encode()).hexdigest()
    assert token.scopes == ["read", "ask"] and token.hint == raw[:8]
    assert raw not in str(ApiToken.objects.values().get())
    assert api_token_authenticate(raw=raw) == token
    assert api_token_authenticate(raw=raw[:-1] + ("A" if raw[-1] != "A" else "B")) is None


def test_last_use_is_written_at_most_once_a_minute(user, django_assert_num_queries):
    _, raw = api_token_create(owner=user, name="script", scopes=["read"])
    with django_assert_num_queries(2):  # the lookup, then the first use written
        api_token_authenticate(raw=raw)
    with django_assert_num_queries(1):  # within the minute: the lookup alone
        api_token_authenticate(raw=raw)
    ApiToken.objects.update(last_used_at=timezone.now() - timedelta(minutes=2))
    with django_assert_num_queries(2):
        api_token_authenticate(raw=raw)


def test_revoked_expired_and_inactive_tokens_are_refused(user):
    _, revoked = api_token_create(owner=user, name="a", scopes=["read"])
    ApiToken.objects.filter(name="a").update(revoked_at=timezone.now())
    _, expired = api_token_create(owner=user, name="b", scopes=["read"])
    ApiToken.objects.filter(name="b").update(expires_at=timezone.now())
    _, inactive = api_token_create(owner=user, name="c", scopes=["read"])
    assert api_token_authenticate(raw=revoked) is None
    assert api_token_authenticate(raw=expired) is None
    user.is_active = False
    user.save()
    assert api_token_authenticate(raw=inactive) is None


@pytest.mark.parametrize(
    ("name", "scopes", "why"),
    [("", ["read"], "needs a name"), ("x", [], "scopes"), ("x", ["write"], "scopes")],
)
def test_a_token_needs_a_name_and_known_scopes(user, name, scopes, why):
    with pytest.raises(TokenError, match=why):
        api_token_create(owner=user, name=name, scopes=scopes)


def test_a_name_is_unique_among_unrevoked_tokens(user):
    api_token_create(owner=user, name="ci", scopes=["read"])
    with pytest.raises(TokenError, match="named 'ci' already"):
        api_token_create(owner=user, name="ci", scopes=["read"])
    ApiToken.objects.update(revoked_at=timezone.now())
    api_token_create(owner=user, name="ci", scopes=["read"])  # a revoked one frees the name


def test_the_command_prints_the_token_as_its_last_line_and_revokes_by_name(user):
    out = io.StringIO()
    call_command("api_token", "create", user.username, "--name", "ci", "--scopes", "read,ask",
                 stdout=out)  # fmt: skip
    raw = out.getvalue().splitlines()[-1]
    assert api_token_authenticate(raw=raw).name == "ci"
    call_command("api_token", "revoke", user.username, "--name", "ci", stdout=io.StringIO())
    assert api_token_authenticate(raw=raw) is None
    with pytest.raises(CommandError, match="no unrevoked token named 'ci'"):
        call_command("api_token", "revoke", user.username, "--name", "ci")
    with pytest.raises(CommandError, match="No user named"):
        call_command("api_token", "create", "nobody", "--name", "x")


def test_the_admin_lists_and_revokes_any_token_never_its_value(user, django_user_model):
    admin = django_user_model.objects.create_superuser("boss", password="pw-boss-123456")
    _, raw = api_token_create(owner=user, name="ci", scopes=["read"])
    browser = BrowserClient()
    browser.force_login(admin)
    listing = browser.get(reverse("admin:chats_apitoken_changelist")).content.decode()
    assert "ci" in listing and raw[:8] in listing and raw not in listing
    token = ApiToken.objects.get()
    detail = browser.get(reverse("admin:chats_apitoken_change", args=[token.pk])).content.decode()
    assert raw not in detail and token.digest not in detail
    browser.post(
        reverse("admin:chats_apitoken_changelist"),
        {"action": "revoke", "_selected_action": [token.pk]},
    )
    assert api_token_authenticate(raw=raw) is None


def test_the_page_revokes_only_the_users_own_tokens(user, other_user):
    theirs, raw = api_token_create(owner=other_user, name="theirs", scopes=["read"])
    browser = BrowserClient(enforce_csrf_checks=True)
    browser.force_login(user)
    page = browser.get(reverse("api_tokens"))
    assert b"theirs" not in page.content
    csrf = page.cookies["csrftoken"].value
    answer = browser.post(
        reverse("api_token_revoke", args=[theirs.pk]), {"csrfmiddlewaretoken": csrf}
    )
    assert answer.status_code == 404
    assert (
        browser.post(reverse("api_token_new"), {"name": "x", "scopes": "read"}).status_code == 403
    )
    assert api_token_authenticate(raw=raw) is not None


def test_a_token_is_masked_in_log_lines(user, caplog):
    from chats.agent.redaction import RedactSecretsFilter

    _, raw = api_token_create(owner=user, name="leaky", scopes=["read"])
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "Bad header %s", (raw,), None)
    RedactSecretsFilter().filter(record)
    assert raw not in record.getMessage() and "[redacted]" in record.getMessage()
