"""Signing in through an OpenID Connect provider (oidc-provider-mock, on a loopback port): the
protocol end to end through the site's own views, accounts found by subject only, the claims
followed at every sign-in, and the password form beside it."""

from __future__ import annotations

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from oidc_provider_mock import run_server_in_thread

from chats.teams.models import Team

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def provider(settings):
    with run_server_in_thread() as server:
        url = f"http://localhost:{server.server_port}"
        settings.OIDC_SERVER_URL = url
        settings.OIDC_CLIENT_ID = "researchsite"
        settings.OIDC_CLIENT_SECRET = "researchsite-client-secret"
        settings.OIDC_PROVIDER_NAME = "Acme SSO"
        settings.OIDC_TEAMS_CLAIM = "groups"
        yield url


def sign_in(client: Client, provider: str, subject: str, claims: dict) -> httpx.Response:
    """The authorization code flow, each hop as the browser would make it; returns the site's
    answer to the provider's redirect back."""
    httpx.put(f"{provider}/users/{subject}", json=claims).raise_for_status()
    login = reverse("openid_connect_login", args=["sso"])
    to_provider = client.post(login)
    assert to_provider.status_code == 302
    authorize = to_provider["Location"]
    assert authorize.startswith(f"{provider}/oauth2/authorize?")
    for part in ("code_challenge=", "code_challenge_method=S256", "state="):
        assert part in authorize
    back = httpx.post(authorize, data={"sub": subject}, follow_redirects=False)
    assert back.status_code == 302
    return client.get(back.headers["Location"])


def signed_in_user(client: Client):
    return get_user_model().objects.get(pk=client.session["_auth_user_id"])


def test_without_a_provider_the_login_page_is_the_password_form(client):
    page = client.get(reverse("login")).content.decode()
    assert "Sign in with" not in page
    assert 'name="password"' in page
    assert client.post(reverse("openid_connect_login", args=["sso"])).status_code == 404


def test_the_login_page_offers_the_provider_and_lets_its_form_go_there(client, provider):
    response = client.get(reverse("login"))
    assert "Sign in with Acme SSO" in response.content.decode()
    assert f"form-action 'self' {provider}" in response["Content-Security-Policy"]


def test_a_first_sign_in_makes_the_account_and_its_teams(client, provider):
    claims = {"preferred_username": "alice", "email": "alice@research.example"}
    response = sign_in(client, provider, "alice-sub", {**claims, "groups": ["research"]})
    assert (response.status_code, response["Location"]) == (302, reverse("chat_list"))
    alice = signed_in_user(client)
    assert (alice.username, alice.email, alice.has_usable_password()) == (
        "alice",
        "alice@research.example",
        False,
    )
    assert [t.name for t in Team.objects.filter(memberships__user=alice)] == ["research"]


def test_a_later_sign_in_finds_the_account_by_subject_and_follows_the_claims(client, provider):
    sign_in(client, provider, "alice-sub", {"preferred_username": "alice", "groups": ["a", "b"]})
    first = signed_in_user(client)
    client.logout()
    changed = {"preferred_username": "alice.m", "email": "alice.m@x.example", "groups": ["b"]}
    sign_in(client, provider, "alice-sub", changed)
    again = signed_in_user(client)
    assert again.pk == first.pk
    assert (again.username, again.email) == ("alice", "alice.m@x.example")
    assert [t.name for t in Team.objects.filter(memberships__user=again)] == ["b"]


def test_an_email_someone_sets_at_the_provider_takes_over_no_account(
    client, provider, django_user_model
):
    victim = django_user_model.objects.create_user(
        "alice", email="alice@research.example", password="pw-alice-123"
    )
    claims = {"preferred_username": "alice", "email": "alice@research.example"}
    sign_in(client, provider, "mallory-sub", claims)
    mallory = signed_in_user(client)
    assert mallory.pk != victim.pk
    assert mallory.username != "alice"  # made unique: the local alice keeps hers


def test_a_deactivated_account_is_told_so(client, provider):
    sign_in(client, provider, "alice-sub", {"preferred_username": "alice"})
    alice = signed_in_user(client)
    client.logout()
    get_user_model().objects.filter(pk=alice.pk).update(is_active=False)
    response = sign_in(client, provider, "alice-sub", {"preferred_username": "alice"})
    assert response["Location"] == f"{reverse('login')}?refused=inactive"
    assert "_auth_user_id" not in client.session
    assert "This account is inactive" in client.get(response["Location"]).content.decode()


def test_without_password_login_only_superusers_use_the_password_form(
    client, provider, settings, django_user_model
):
    settings.PASSWORD_LOGIN = False
    django_user_model.objects.create_user("analyst", password="pw-analyst-123", is_staff=True)
    django_user_model.objects.create_superuser("root", password="pw-root-123")
    refused = client.post(reverse("login"), {"username": "analyst", "password": "pw-analyst-123"})
    assert refused.status_code == 200
    assert "password sign-in is for administrators only" in refused.content.decode()
    admin = reverse("admin:login")
    refused = client.post(admin, {"username": "analyst", "password": "pw-analyst-123"})
    assert "_auth_user_id" not in client.session
    signed_in = client.post(reverse("login"), {"username": "root", "password": "pw-root-123"})
    assert signed_in.status_code == 302
    assert signed_in_user(client).username == "root"
