"""The websocket's session and user: channels' `AuthMiddlewareStack`, less a wrapper per frame.

channels' `SessionMiddleware` wraps `send` so that it can save a modified session and set its
cookie on `http.response.start`. A websocket never sends that message, yet the wrapper still
looks the session up (`modified`, `is_empty()`) on every frame it passes on: ~5% of the event
loop's time with 200 chats streaming (docs/PERFORMANCE.md, "Channels' per-message wrappers
skipped"). Here a websocket gets its session and user exactly as channels builds them, and the
server's own `send`. A test fails if channels ever saves sessions on a websocket message.
"""

from __future__ import annotations

from channels.auth import AuthMiddleware
from channels.sessions import CookieMiddleware, InstanceSessionWrapper, SessionMiddleware


class WebsocketSessionMiddleware(SessionMiddleware):
    """channels' session middleware for a websocket: the session in the scope, `send` as is."""

    async def __call__(self, scope, receive, send):
        wrapper = InstanceSessionWrapper(scope, send)
        await wrapper.resolve_session()
        return await self.inner(wrapper.scope, receive, send)


def websocket_auth_stack(inner):
    """`channels.auth.AuthMiddlewareStack(inner)`, with `WebsocketSessionMiddleware` in place of
    channels' `SessionMiddleware`."""
    return CookieMiddleware(WebsocketSessionMiddleware(AuthMiddleware(inner)))
