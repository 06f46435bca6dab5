"""Log lines as text (`make run`) or, with LOG_FORMAT=json, one JSON object per line.

Every line names its `time`, `level`, `logger` and `message`; lines logged while working on a
turn or a request also carry `chat_id`, `turn_id`, `user_id`, `agent` and `request_id`
(bound by chats/log_context.py). Django's, uvicorn's and the site's loggers all write through
the one handler configured in settings.LOGGING.
"""

from __future__ import annotations

import logging
import uuid

from pythonjsonlogger.json import JsonFormatter

from chats.log_context import LOG_FIELDS, bind_log_context, log_context

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


def json_formatter() -> logging.Formatter:
    """One JSON object per line (python-json-logger): time, level, logger, message, context."""
    from pythonjsonlogger.core import RESERVED_ATTRS

    logging.captureWarnings(True)  # warnings become log lines, so they are JSON too
    return JsonFormatter(
        "{asctime}{levelname}{name}{message}",
        style="{",
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        reserved_attrs=[*RESERVED_ATTRS, *_NOT_FIELDS],
        datefmt="%Y-%m-%dT%H:%M:%S%z",
    )


class RequestIdMiddleware:
    """Give each request an id (the proxy's X-Request-ID, or a new one) for its log lines,
    and send it back in the response's X-Request-ID header."""

    sync_capable = True
    async_capable = False

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        given = request.headers.get("X-Request-ID", "")
        request_id = given if 0 < len(given) <= 200 and given.isprintable() else uuid.uuid4().hex
        bind_log_context(request_id=request_id)
        response = self.get_response(request)
        response["X-Request-ID"] = request_id
        return response
