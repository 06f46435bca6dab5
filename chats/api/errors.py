"""Every error under /api/ is JSON `{"detail": "..."}` with its status.

- django-ninja's own errors get handlers here: bad input (its ValidationError) is a 400 naming
  the field; 401 carries `WWW-Authenticate: Bearer`.
- A turn the start service refuses (`chats.errors.TurnStartError`) answers as the page is
  answered: its code decides the status (`REFUSAL_STATUS`).
- What reaches no endpoint, or fails before or after one (an unknown route, a method an
  endpoint does not take, a host Django refuses, a crash), is made JSON by
  `api_json_errors_middleware`, the one place that holds the rule for all of /api/.
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus

from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from chats.errors import ErrorCode, RequestRefused
from chats.library.services import LibraryError
from researchsite.middleware import request_middleware

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"

# A refused turn's status: as the page's error frame means it. One chat answering already is a
# conflict with the chat's state (409); the user's limits are "too many" (429).
REFUSAL_STATUS: dict[str, int] = {
    ErrorCode.TURN_IN_PROGRESS: 409,
    ErrorCode.TOO_MANY_TURNS: 429,
    ErrorCode.USAGE_LIMIT: 429,  # this month's usage limit
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.TOO_MANY_SOCKETS: 429,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.READ_ONLY: 403,  # a chat shared with the user's team: read, never written
    ErrorCode.BAD_FRAME: 400,
    ErrorCode.UNAUTHENTICATED: 401,
    ErrorCode.LOGGED_OUT: 401,
    ErrorCode.SERVER_ERROR: 503,  # the server is restarting: ask again in a moment
}


def refusal_response(refused: RequestRefused) -> JsonResponse:
    return detail(str(refused), REFUSAL_STATUS.get(refused.code, 400))


def detail(message: str, status: int) -> JsonResponse:
    return JsonResponse({"detail": message}, status=status)


def install_handlers(api: NinjaAPI) -> None:
    """The API's error handlers beside django-ninja's own (HttpError, Http404: `detail`)."""

    @api.exception_handler(ValidationError)
    def bad_input(request: HttpRequest, error: ValidationError) -> HttpResponse:
        return detail(validation_message(error.errors), 400)

    @api.exception_handler(AuthenticationError)
    def unauthenticated(request: HttpRequest, error: AuthenticationError) -> HttpResponse:
        response = detail(str(error), 401)
        response["WWW-Authenticate"] = 'Bearer realm="api"'
        return response

    @api.exception_handler(HttpError)
    def http_error(request: HttpRequest, error: HttpError) -> HttpResponse:
        return detail(str(error), error.status_code)

    @api.exception_handler(RequestRefused)
    def refused(request: HttpRequest, error: RequestRefused) -> HttpResponse:
        return refusal_response(error)

    @api.exception_handler(LibraryError)
    def not_as_asked(request: HttpRequest, error: LibraryError) -> HttpResponse:
        return detail(str(error), 400)

    @api.exception_handler(Exception)
    def crashed(request: HttpRequest, error: Exception) -> HttpResponse:
        logger.error("The API failed on %s", request.path, exc_info=error)
        return detail("Something went wrong on our side.", 500)


def validation_message(errors: list[dict]) -> str:
    """One line per problem: "body.question: Field required"."""
    lines = []
    for error in errors[:5]:
        where = ".".join(str(part) for part in error.get("loc", ()) if part != "payload")
        lines.append(f"{where}: {error.get('msg', 'invalid')}" if where else error.get("msg", ""))
    return "; ".join(lines) or "The request is not valid."


_MESSAGES = {
    400: "Bad request.",
    401: "Authentication required.",
    403: "Forbidden.",
    404: "Not found.",
    413: "The request body is too large.",
}


@request_middleware
def api_json_errors_middleware(request: HttpRequest):
    """Under /api/, an error response that is not JSON yet gets the body `{"detail": "..."}`."""
    response = yield
    if (
        not request.path.startswith(API_PREFIX)
        or response.status_code < 400
        or response.streaming
        or response.get("Content-Type", "").startswith("application/json")
    ):
        return
    status = response.status_code
    if status == 405:
        message = f"This endpoint does not take {request.method}."
    else:
        message = _MESSAGES.get(status) or _phrase(status)
    response.content = json.dumps({"detail": message}).encode()
    response["Content-Type"] = "application/json"
    if response.has_header("Content-Length"):
        response["Content-Length"] = str(len(response.content))


def _phrase(status: int) -> str:
    if status >= 500:
        return "Something went wrong on our side."
    try:
        return f"{HTTPStatus(status).phrase}."
    except ValueError:
        return "The request was refused."


def not_found(request: HttpRequest, rest: str = "") -> JsonResponse:
    """Any path under /api/ that no endpoint serves."""
    return detail(f"No such endpoint: {request.path}", 404)
