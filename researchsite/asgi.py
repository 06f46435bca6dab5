"""ASGI entry point: pages and static files over HTTP, the chat websocket, the demo agent, the
MCP server (/mcp).

Data flow: browser ⇄ chats.pages.consumer (websocket) → chats.run.turn_run → chats.agent (HTTP/SSE
to the agent) → chats.live.event_log (store) → chats.live.relay (to every page of the chat) →
citations (the cited answer).
"""

import os
import sys

from django.core.asgi import get_asgi_application

from researchsite.heap import freeze_heap_after_startup, tune_collector

# The database thread waits on PostgreSQL with the GIL released, then queues for it behind the
# event loop, for up to the switch interval (5 ms by default) per query: 20 queries to start a
# turn became 100 ms while streams were busy (docs/PERFORMANCE.md, "The GIL's switch interval").
sys.setswitchinterval(float(os.environ.get("GIL_SWITCH_INTERVAL", "0.0005")))
tune_collector()

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "researchsite.settings")
django_asgi_app = get_asgi_application()  # before importing anything that touches models

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from chats.api.mcp import mcp_app, mcp_running  # noqa: E402
from chats.routing import websocket_urlpatterns  # noqa: E402
from chats.run.lifespan import Worker, lifespan_app  # noqa: E402
from chats.watch.worker import start_watch_worker, stop_watch_worker  # noqa: E402
from researchsite.operations import with_operations_endpoints  # noqa: E402
from researchsite.origins import SameOriginHttp, SameOriginValidator  # noqa: E402
from researchsite.websocket_sessions import websocket_auth_stack  # noqa: E402


def _with_mcp(site):
    """/mcp to the MCP server (chats/api/mcp.py), behind the site's host and Origin checks."""
    mcp = SameOriginHttp(mcp_app)

    async def http_app(scope, receive, send):
        if scope["path"] == "/mcp" or scope["path"].startswith("/mcp/"):
            return await mcp(scope, receive, send)
        return await site(scope, receive, send)

    return http_app


async def site_lifespan(scope, receive, send):
    """The site's lifespan (chats/run/lifespan.py), inside the MCP server's: the SDK's session
    manager runs while requests are served. It runs the watches' task worker unless
    WATCH_WORKER is false (chats/watch/worker.py)."""
    workers = [Worker(start_watch_worker, stop_watch_worker)] if settings.WATCH_WORKER else []
    async with mcp_running():
        await lifespan_app(scope, receive, send, workers=workers)


def _http_app():
    site = _with_mcp(ASGIStaticFilesHandler(django_asgi_app))
    if not settings.DEMO_AGENT_ENABLED:
        return site
    from urllib.parse import urlsplit

    from django.http.request import split_domain_port, validate_host

    from demo_agent.access import SiteOnly
    from demo_agent.app import DemoAgentApp

    def host_allowed(host: str) -> bool:
        # The host of RESEARCH_AGENT_URL too: the site calls 127.0.0.1 even when ALLOWED_HOSTS
        # names only its public name. No browser page can send that Host for another site.
        own = urlsplit(settings.RESEARCH_AGENT_URL).netloc
        domain, _ = split_domain_port(host)
        return bool(domain) and validate_host(
            domain, [*settings.ALLOWED_HOSTS, split_domain_port(own)[0]]
        )

    demo = SiteOnly(
        DemoAgentApp(
            secret=settings.DEMO_AGENT_SECRET,
            pace=settings.DEMO_AGENT_PACE,
            pro_entitled=settings.DEMO_AGENT_PRO_ENTITLED,
        ),
        token=settings.DEMO_AGENT_TOKEN,
        host_allowed=host_allowed,
    )

    async def http_app(scope, receive, send):
        if scope["path"] in (settings.DEMO_AGENT_PATH, settings.DEMO_WORKFLOW_PATH):
            return await demo(scope, receive, send)
        return await site(scope, receive, send)

    return http_app


application = ProtocolTypeRouter(
    {
        "http": with_operations_endpoints(_http_app()),
        # Only the site's own origin (scheme, host and port) or CSRF_TRUSTED_ORIGINS may connect.
        "websocket": SameOriginValidator(websocket_auth_stack(URLRouter(websocket_urlpatterns))),
        "lifespan": freeze_heap_after_startup(site_lifespan),
    }
)
