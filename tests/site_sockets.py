"""A websocket to the served site as a signed-in browser opens one: its Origin, Host and
session cookie, through every middleware of `researchsite.asgi.application`."""

from __future__ import annotations

from channels.testing import WebsocketCommunicator
from django.conf import settings


def site_socket(path: str, session_key: str) -> WebsocketCommunicator:
    from researchsite.asgi import application

    return WebsocketCommunicator(
        application,
        path,
        headers=[
            (b"origin", b"http://127.0.0.1"),
            (b"host", b"127.0.0.1"),
            (b"cookie", f"{settings.SESSION_COOKIE_NAME}={session_key}".encode()),
        ],
    )
