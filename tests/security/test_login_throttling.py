"""Login throttling (django-axes): per username and address, on the site's and the admin's login."""

from __future__ import annotations

from datetime import timedelta
from http import HTTPStatus

import pytest
from axes.models import AccessAttempt
from django.db.models import F
from django.test import AsyncClient, Client

from tests.security.conftest import PASSWORD, fresh_site_settings

pytestmark = pytest.mark.django_db

COOL_OFF = timedelta(minutes=1)  # the site's default is 15 minutes; the rule is the same
LOCKED = "Too many failed sign-ins. Try again in"


@pytest.fixture(autouse=True)
def short_cool_off(settings):
    settings.AXES_COOLOFF_TIME = COOL_OFF


def let_the_cool_off_pass() -> None:
    """What the cool-off's passing does to the stored failures: they are that much older."""
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - COOL_OFF - timedelta(seconds=1))


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("reviewer", password=PASSWORD, is_staff=True)


LOGIN_PAGES = {"site": "/login/", "admin": "/admin/login/"}


def sign_in(client: Client, page: str, username: str, password: str):
    return client.post(LOGIN_PAGES[page], {"username": username, "password": password})


def fail_until_locked(client: Client, page: str, username: str) -> None:
    """Send wrong passwords up to the limit (5 by default): the fifth failure locks the pair."""
    for _ in range(4):
        response = sign_in(client, page, username, "wrong-password")
        assert response.status_code == HTTPStatus.OK  # the form again, with its error
        assert LOCKED not in response.text
    fifth = sign_in(client, page, username, "wrong-password")
    assert fifth.status_code == HTTPStatus.TOO_MANY_REQUESTS


def assert_signed_in(response) -> None:
    assert response.status_code == HTTPStatus.FOUND, response.status_code


@pytest.mark.parametrize("page", ["site", "admin"])
def test_the_right_password_is_refused_until_the_lock_out_ends(page, user, staff):
    username = "analyst" if page == "site" else "reviewer"
    client = Client()
    fail_until_locked(client, page, username)

    refused = sign_in(client, page, username, PASSWORD)
    assert refused.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert "Too many failed sign-ins. Try again in 1 minute." in refused.text
    assert "_auth_user_id" not in client.session
    if page == "admin":
        assert 'class="errornote"' in refused.text  # in the admin's own look

    let_the_cool_off_pass()
    assert_signed_in(sign_in(client, page, username, PASSWORD))


def test_the_lock_out_page_says_how_long_by_default(user, settings):
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)
    client = Client()
    fail_until_locked(client, "site", "analyst")
    assert "Try again in 15 minutes." in sign_in(client, "site", "analyst", PASSWORD).text


def test_another_user_on_the_same_address_is_not_locked(user, staff):
    client = Client()
    fail_until_locked(client, "site", "analyst")
    assert sign_in(client, "site", "analyst", PASSWORD).status_code == 429

    assert_signed_in(sign_in(Client(), "site", "reviewer", PASSWORD))


def test_the_same_user_from_another_address_is_not_locked(user):
    fail_until_locked(Client(), "site", "analyst")

    assert_signed_in(sign_in(Client(REMOTE_ADDR="192.0.2.7"), "site", "analyst", PASSWORD))


def test_fewer_failures_than_the_limit_do_not_lock(user):
    client = Client()
    for _ in range(4):
        sign_in(client, "site", "analyst", "wrong-password")
    assert_signed_in(sign_in(client, "site", "analyst", PASSWORD))


@pytest.mark.django_db(transaction=True)
async def test_the_lock_out_page_is_served_by_the_async_handler_too(user):
    """The site runs under ASGI, where axes' middleware takes its async path."""
    client = AsyncClient()
    for _ in range(5):  # the fifth failure locks the pair
        await client.post("/login/", {"username": "analyst", "password": "wrong-password"})
    refused = await client.post("/login/", {"username": "analyst", "password": PASSWORD})
    assert refused.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert LOCKED in refused.text


def test_the_limit_and_the_lock_out_come_from_the_environment(monkeypatch):
    monkeypatch.delenv("LOGIN_FAILURE_LIMIT", raising=False)
    monkeypatch.delenv("LOGIN_LOCKOUT_MINUTES", raising=False)
    defaults = fresh_site_settings(monkeypatch)
    assert defaults.AXES_FAILURE_LIMIT == 5
    assert defaults.AXES_COOLOFF_TIME.total_seconds() == 15 * 60

    site = fresh_site_settings(monkeypatch, LOGIN_FAILURE_LIMIT="3", LOGIN_LOCKOUT_MINUTES="2")
    assert site.AXES_FAILURE_LIMIT == 3
    assert site.AXES_COOLOFF_TIME.total_seconds() == 2 * 60


def test_failures_for_one_username_from_many_addresses_lock_it_too(user, staff, settings):
    """Guesses spread over addresses, each under the pair's limit, meet the username's cap."""
    settings.LOGIN_FAILURE_LIMIT_PER_USERNAME = 8
    for address in ("192.0.2.1", "192.0.2.2"):
        for _ in range(4):  # one under the pair's limit of 5
            sign_in(Client(REMOTE_ADDR=address), "site", "analyst", "wrong-password")

    refused = sign_in(Client(REMOTE_ADDR="192.0.2.3"), "site", "analyst", PASSWORD)
    assert refused.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert LOCKED in refused.text
    assert_signed_in(sign_in(Client(REMOTE_ADDR="192.0.2.3"), "admin", "reviewer", PASSWORD))


def test_under_the_usernames_cap_other_addresses_still_sign_in(user, settings):
    settings.LOGIN_FAILURE_LIMIT_PER_USERNAME = 8
    for address in ("192.0.2.1", "192.0.2.2"):
        for _ in range(3):
            sign_in(Client(REMOTE_ADDR=address), "site", "analyst", "wrong-password")
    assert_signed_in(sign_in(Client(REMOTE_ADDR="192.0.2.3"), "site", "analyst", PASSWORD))


@pytest.mark.parametrize("page", ["site", "admin"])
def test_a_client_address_that_is_not_an_ip_is_refused_clearly(page, user, staff):
    """What a trusted proxy passes on from a forged X-Forwarded-For (a 500 on PostgreSQL, whose
    column for the address is `inet`)."""
    username = "analyst" if page == "site" else "reviewer"
    client = Client(REMOTE_ADDR="not-an-ip, <script>")
    for password in ("wrong-password", PASSWORD):
        response = sign_in(client, page, username, password)
        assert response.status_code == HTTPStatus.BAD_REQUEST
        assert "Your network address could not be read" in response.text
    assert not AccessAttempt.objects.exists()


def test_the_per_username_limit_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("LOGIN_FAILURE_LIMIT_PER_USERNAME", raising=False)
    assert fresh_site_settings(monkeypatch).LOGIN_FAILURE_LIMIT_PER_USERNAME == 20
    site = fresh_site_settings(monkeypatch, LOGIN_FAILURE_LIMIT_PER_USERNAME="50")
    assert site.LOGIN_FAILURE_LIMIT_PER_USERNAME == 50


def test_the_password_form_beside_single_sign_on_is_throttled_too(settings, django_user_model):
    settings.OIDC_SERVER_URL, settings.OIDC_CLIENT_ID = "https://sso.example", "researchsite"
    settings.PASSWORD_LOGIN = False  # the form is for superusers: still locked after 5 failures
    django_user_model.objects.create_superuser("root", password=PASSWORD)
    client = Client()
    fail_until_locked(client, "site", "root")
    refused = sign_in(client, "site", "root", PASSWORD)
    assert refused.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert "_auth_user_id" not in client.session
