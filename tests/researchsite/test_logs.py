"""JSON log lines hold no secret, wherever in the record it is."""

from __future__ import annotations

import logging

from django.test import RequestFactory
from pythonjsonlogger.json import JsonFormatter

from researchsite.logs import json_formatter

TOKEN = "rsk_" + "Ab9_" * 10 + "xyz"  # an API token's shape (chats/api/services.py)


def test_a_request_logged_with_a_token_in_its_url_keeps_the_token_out_of_the_line():
    request = RequestFactory().get(f"/api/v1/chats?token={TOKEN}")
    record = logging.LogRecord("django.request", logging.WARNING, __file__, 1, "Bad Request: %s",
                               (request.path,), None)  # fmt: skip
    record.request, record.status_code = request, 400  # as django.request logs a 4xx
    assert TOKEN in JsonFormatter().format(record)  # the request's text holds its URL
    line = json_formatter().format(record)
    assert TOKEN not in line and "[redacted]" in line and '"status_code": 400' in line
