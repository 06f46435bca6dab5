"""Each request has an id for its log lines: the proxy's X-Request-ID, or a new one."""

from __future__ import annotations

import logging

import pytest
from django.test import AsyncClient

from chats.log_context import log_context
from researchsite.logs import ContextFilter

pytestmark = pytest.mark.django_db


def test_the_proxys_request_id_is_kept_and_sent_back(client):
    response = client.get("/login/", HTTP_X_REQUEST_ID="edge-42")
    assert response["X-Request-ID"] == "edge-42"


def test_a_request_without_one_gets_a_new_id(client):
    first = client.get("/login/")["X-Request-ID"]
    second = client.get("/login/")["X-Request-ID"]
    assert len(first) == 32 and first != second


def test_a_request_line_logged_while_serving_carries_its_id(client):
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Keep()
    handler.addFilter(ContextFilter())
    django_request = logging.getLogger("django.request")
    django_request.addHandler(handler)
    try:
        client.get("/no-such-page/", HTTP_X_REQUEST_ID="edge-404")
    finally:
        django_request.removeHandler(handler)
    assert [record.request_id for record in records] == ["edge-404"]


def test_the_id_is_taken_off_once_the_request_is_served(client):
    """A sync request runs in its thread's context (the test's, here): the next request served
    there, or anything the thread logs meanwhile, must not carry its id."""
    client.get("/login/", HTTP_X_REQUEST_ID="edge-1")
    assert "request_id" not in log_context()


@pytest.mark.django_db(transaction=True)
async def test_an_async_request_keeps_its_id_to_its_end_and_takes_it_off():
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Keep()
    handler.addFilter(ContextFilter())
    django_request = logging.getLogger("django.request")
    django_request.addHandler(handler)
    try:
        response = await AsyncClient().get("/no-such-page/", headers={"X-Request-ID": "edge-async"})
    finally:
        django_request.removeHandler(handler)
    assert response["X-Request-ID"] == "edge-async"
    assert [record.request_id for record in records] == ["edge-async"]
    assert "request_id" not in log_context()
