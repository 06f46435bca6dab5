"""ASGI entry point: pages and static files over HTTP, the chat websocket, the demo agent.

Data flow: browser ⇄ chats.consumers (websocket) → chats.runner → chats.agent (HTTP/SSE to the
agent) → chats.event_log (store, then relay to the chat's group) → citations (the cited answer).
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "researchsite.settings")
django_asgi_app = get_asgi_application()  # before importing anything that touches models

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from chats.lifespan import lifespan_app  # noqa: E402
from chats.routing import websocket_urlpatterns  # noqa: E402
from researchsite.origins import SameOriginValidator  # noqa: E402


def _http_app():
    site = ASGIStaticFilesHandler(django_asgi_app)
    if not settings.DEMO_AGENT_ENABLED:
        return site
    from demo_agent.app import DemoAgentApp

    demo = DemoAgentApp(secret=settings.DEMO_AGENT_SECRET, pace=settings.DEMO_AGENT_PACE)

    async def http_app(scope, receive, send):
        if scope["path"] == settings.DEMO_AGENT_PATH:
            return await demo(scope, receive, send)
        return await site(scope, receive, send)

    return http_app


application = ProtocolTypeRouter(
    {
        "http": _http_app(),
        # Only the site's own origin (scheme, host and port) or CSRF_TRUSTED_ORIGINS may connect.
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
        "lifespan": lifespan_app,
    }
)
