"""The websocket's session and user come from channels' middleware; its frames skip the session
wrapper, which acts only on HTTP responses (researchsite.websocket_sessions)."""

from __future__ import annotations

import pytest
from channels.sessions import InstanceSessionWrapper
from channels.testing import WebsocketCommunicator

from researchsite.websocket_sessions import websocket_auth_stack

pytestmark = pytest.mark.django_db(transaction=True)


def test_channels_saves_sessions_and_sets_cookies_only_on_http_responses():
    """If a channels upgrade starts acting on a websocket message, passing `send` around its
    wrapper would skip that: this fails first."""
    acted_on = {*InstanceSessionWrapper.save_message_types}
    acted_on |= {*InstanceSessionWrapper.cookie_response_message_types}
    assert acted_on == {"http.response.start"}


async def test_a_websocket_gets_its_user_and_session_and_the_servers_send(user, session_cookie):
    seen = {}

    async def app(scope, receive, send):
        seen.update(user=scope["user"], session_key=scope["session"].session_key, send=send)
        await send({"type": "websocket.accept"})

    stack = websocket_auth_stack(app)

    async def server_side(scope, receive, send):
        seen["server_send"] = send
        await stack(scope, receive, send)

    communicator = WebsocketCommunicator(
        server_side, "/ws/", headers=[(b"cookie", session_cookie.encode())]
    )
    connected, _ = await communicator.connect(timeout=5)
    await communicator.disconnect()
    assert connected
    assert seen["user"].pk == user.pk
    assert seen["session_key"] == session_cookie.split("=", 1)[1]
    assert seen["send"] is seen["server_send"]
