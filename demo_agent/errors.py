"""HTTP errors the agent answers with before any event, as the real API does."""

from __future__ import annotations

from typing import Any


class HttpError(Exception):
    """A status and a JSON `detail` (a string, or a list of `{loc, msg, type}` for 422)."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(status, detail)
        self.status = status
        self.detail = detail
