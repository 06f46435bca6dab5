"""Why the site refuses something a page asked for, and the one error that carries it.

A refusal has a code (`ErrorCode`, the `code` of the page's error frame) and a message the page
shows as it is. The websocket protocol raises it for a frame it cannot read
(`chats.live.protocol.parse_frame`), the services for an ask they cannot start
(`chats.services.turn_start_many`, a question's or a workflow's); the consumer and the pages
answer each the same way. Kept apart from the websocket layer so that the services, which
also serve plain views, do not import it.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """Why the server refused something; the page shows the frame's message."""

    BAD_FRAME = "bad_frame"  # malformed, oversized, binary or invalid frame
    TOO_MANY_SOCKETS = "too_many_sockets"  # WS_MAX_SOCKETS_PER_USER; the socket is closed
    RATE_LIMITED = "rate_limited"  # WS_MAX_FRAMES_PER_SECOND; the frame was dropped
    TURN_IN_PROGRESS = "turn_in_progress"  # this chat already has a streaming turn
    TOO_MANY_TURNS = "too_many_turns"  # AGENT_MAX_CONCURRENT_TURNS across the user's chats
    # USAGE_MONTHLY_LIMIT_TOKENS / _COST (or the user's or team's override): this month's usage,
    # with what running answers and this question are expected to use, would pass it
    USAGE_LIMIT = "usage_limit"
    LOGGED_OUT = "logged_out"  # the user logged out; the socket is closed
    UNAUTHENTICATED = "unauthenticated"  # not logged in; the socket is closed
    NOT_FOUND = "not_found"  # no such chat for this user; the socket is closed
    READ_ONLY = "read_only"  # a chat shared with the user's team: they read it, never write
    SERVER_ERROR = "server_error"  # our fault; the socket stays open


class RequestRefused(ValueError):
    """Something a page asked for that we refuse; `str(error)` is shown to the user."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.BAD_FRAME) -> None:
        super().__init__(message)
        self.code = code


# The names the protocol and the services raise it by: one class, so the consumer catches one.
FrameError = RequestRefused
TurnStartError = RequestRefused
