"""The "Theme" choice: kept per user on the server, a CSRF-checked POST, put on every page."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from django.template.loader import render_to_string
from django.test import Client, RequestFactory
from django.urls import reverse

from chats.models import Preference

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_in(client, user):
    client.force_login(user)
    return client


def test_a_new_user_follows_the_system_and_every_choice_is_offered(logged_in):
    html = logged_in.get(reverse("chat_list")).content.decode()
    assert '<html lang="en">' in html  # no data-theme: prefers-color-scheme decides
    assert '<meta name="color-scheme" content="light dark">' in html
    assert '<label for="theme-choice">Theme</label>' in html
    for value, label in (("system", "System"), ("light", "Light"), ("dark", "Dark")):
        assert f'<option value="{value}"' in html and f">{label}</option>" in html
    assert '<option value="system" selected>' in html


def test_a_chosen_theme_is_kept_for_the_user_and_shown_on_every_page(logged_in, user, other_user):
    response = logged_in.post(reverse("theme_set"), {"theme": "dark", "next": "/workflows/"})
    assert response.status_code == HTTPStatus.FOUND
    assert response["Location"] == "/workflows/"
    assert Preference.objects.get(user=user).theme == "dark"
    for url in (reverse("chat_list"), reverse("workflow_list"), reverse("output_schemas")):
        html = logged_in.get(url).content.decode()
        assert '<html lang="en" data-theme="dark">' in html
        assert '<option value="dark" selected>' in html
    # Changing it again updates the same row; another user is untouched.
    logged_in.post(reverse("theme_set"), {"theme": "light"}, HTTP_ACCEPT="application/json")
    assert list(Preference.objects.values_list("user_id", "theme")) == [(user.pk, "light")]
    other = Client()
    other.force_login(other_user)
    assert 'data-theme="' not in other.get(reverse("chat_list")).content.decode()


def test_the_json_answer_and_a_refused_value(logged_in, user):
    ok = logged_in.post(reverse("theme_set"), {"theme": "dark"}, HTTP_ACCEPT="application/json")
    assert ok.json() == {"theme": "dark"}
    bad = logged_in.post(reverse("theme_set"), {"theme": "purple"}, HTTP_ACCEPT="application/json")
    assert bad.status_code == HTTPStatus.BAD_REQUEST
    assert bad.json() == {"error": "Choose one of: System, Light, Dark."}
    plain = logged_in.post(reverse("theme_set"), {"theme": ""})
    assert plain.status_code == HTTPStatus.BAD_REQUEST
    assert Preference.objects.get(user=user).theme == "dark"  # nothing lost


def test_it_goes_back_only_to_this_site(logged_in):
    response = logged_in.post(
        reverse("theme_set"), {"theme": "dark", "next": "https://evil.example/"}
    )
    assert response["Location"] == reverse("chat_list")


def test_it_needs_a_login_a_post_and_a_csrf_token(client, user):
    assert client.post(reverse("theme_set"), {"theme": "dark"}).status_code == HTTPStatus.FOUND
    checked = Client(enforce_csrf_checks=True)
    checked.force_login(user)
    assert checked.get(reverse("theme_set")).status_code == HTTPStatus.METHOD_NOT_ALLOWED
    refused = checked.post(reverse("theme_set"), {"theme": "dark"})
    assert refused.status_code == HTTPStatus.FORBIDDEN
    assert not Preference.objects.exists()


def test_the_header_costs_one_query_and_its_theme_none(logged_in, user, django_assert_num_queries):
    """The theme is the session's copy, taken at its first page and changed with the choice;
    the header's one query is its count of unseen changes."""
    assert '<html lang="en">' in logged_in.get(reverse("chat_list")).content.decode()
    logged_in.post(reverse("theme_set"), {"theme": "dark"}, HTTP_ACCEPT="application/json")
    request = RequestFactory().get("/")
    request.user, request.session = user, logged_in.session
    assert request.session["theme"] == "dark"  # loads the session before counting
    with django_assert_num_queries(1):
        html = render_to_string("base.html", request=request)
    assert '<html lang="en" data-theme="dark">' in html
