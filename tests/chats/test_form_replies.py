"""A page's form POST: JSON for the page's script, else a redirect back to a page of this site."""

from __future__ import annotations

import pytest
from django.test import RequestFactory

from chats.form_replies import redirect_back, wants_json

BROWSER_FORM = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize(
    ("accept", "json"),
    [
        ("application/json", True),  # postForm in site.js
        ("application/json, text/plain;q=0.5", True),
        (BROWSER_FORM, False),  # the plain form, posted by the browser
        ("*/*", False),  # curl, or no header at all
        ("", False),
    ],
)
def test_only_a_request_that_prefers_json_gets_json(accept, json):
    assert wants_json(RequestFactory().post("/x", HTTP_ACCEPT=accept)) is json


@pytest.mark.parametrize(
    ("next_url", "secure", "location"),
    [
        ("/chats/7/", False, "/chats/7/"),
        ("https://evil.example/", False, "/"),
        ("//evil.example/", False, "/"),
        ("http://testserver/chats/7/", True, "/"),  # no step down from https
        ("", False, "/"),
    ],
)
def test_it_goes_back_only_to_this_site(next_url, secure, location):
    request = RequestFactory().post("/x", {"next": next_url}, secure=secure)
    assert redirect_back(request, "chat_list")["Location"] == location
