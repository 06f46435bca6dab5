"""Each request has an id for its log lines: the proxy's X-Request-ID, or a new one."""

from __future__ import annotations

import contextvars
import logging

import pytest

from researchsite.logs import ContextFilter

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(client):
    """The test client, each request in a copy of the test's context: a sync request binds its
    id in the thread's context, which would outlive the test (under ASGI each request has a
    task, and a context, of its own)."""

    class Isolated:
        def get(self, *args, **kwargs):
            return contextvars.copy_context().run(client.get, *args, **kwargs)

    return Isolated()


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
