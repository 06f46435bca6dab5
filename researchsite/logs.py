"""Log lines as text (`make run`) or, with LOG_FORMAT=json, one JSON object per line.

Every line names its `time`, `level`, `logger` and `message`; lines logged while working on a
turn or a request also carry `chat_id`, `turn_id`, `user_id`, `agent` and `request_id`
(bound by chats/log_context.py). Django's, uvicorn's and the site's loggers all write through
the one handler configured in settings.LOGGING.
"""

from __future__ import annotations

import logging
import uuid

from django.http import HttpRequest
from django.utils.log import log_response
from pythonjsonlogger.json import JsonFormatter

from chats.agent.redaction import redactor
from chats.log_context import LOG_FIELDS, log_context, log_context_bound
from researchsite.middleware import request_middleware

# uvicorn adds a copy of some messages with terminal colours; a JSON line needs only one.
_NOT_FIELDS = ("color_message",)


class ContextFilter(logging.Filter):
    """Copy the task's log context (turn, request) onto each record it logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = log_context()
        if context:
            for name in LOG_FIELDS:
                if name in context and not hasattr(record, name):
                    setattr(record, name, context[name])
        return True


class RedactedJsonFormatter(JsonFormatter):
    """A JSON line with every secret and key shape masked (chats/agent/redaction.py) wherever it
    is, the record's extra fields included: Django's request log lines carry the request, whose
    text holds its URL, where a client may have put an API token."""

    def jsonify_log_record(self, log_data) -> str:
        return redactor().text(super().jsonify_log_record(log_data))


def json_formatter() -> logging.Formatter:
    """One JSON object per line (python-json-logger): time, level, logger, message, context."""
    from pythonjsonlogger.core import RESERVED_ATTRS

    logging.captureWarnings(True)  # warnings become log lines, so they are JSON too
    return RedactedJsonFormatter(
        "{asctime}{levelname}{name}{message}",
        style="{",
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        reserved_attrs=[*RESERVED_ATTRS, *_NOT_FIELDS],
        datefmt="%Y-%m-%dT%H:%M:%S%z",
    )


def _request_id(request) -> str:
    given = request.headers.get("X-Request-ID", "")
    return given if 0 < len(given) <= 200 and given.isprintable() else uuid.uuid4().hex


@request_middleware
def request_id_middleware(request: HttpRequest):
    """Give each request an id (the proxy's X-Request-ID, or a new one) for the lines logged
    while serving it, and send it back in the response's X-Request-ID header."""
    request_id = _request_id(request)
    with log_context_bound(request_id=request_id):
        response = yield
        if response.status_code >= 400:
            # Django logs a refused or failed request ("Not Found: /x") once the middleware has
            # answered: log it while the id is bound (Django then sees it logged, and skips it).
            log_response(
                "%s: %s", response.reason_phrase, request.path, response=response, request=request
            )
    response["X-Request-ID"] = request_id
