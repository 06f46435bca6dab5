"""The websocket's origin check: the same rule as Django's CSRF origin check; and the same
host and origin checks for the one HTTP app served outside Django (the MCP server).

Channels' `AllowedHostsOriginValidator` compares host names only, so a page on another port or
scheme of an allowed host (`http://127.0.0.1:9999`) could open a signed-in user's chats. A
browser always sends `Origin` on a websocket handshake and a page cannot forge it, so this
accepts exactly the site's own origin (scheme, host and port) and `CSRF_TRUSTED_ORIGINS`, as
`django.middleware.csrf.CsrfViewMiddleware._origin_verified` does for unsafe HTTP requests.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain


class SameOriginValidator:
    """ASGI middleware: pass a websocket on only if its Origin is the site's own or trusted."""

    def __init__(self, application) -> None:
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            raise ValueError("SameOriginValidator guards websocket connections only")
        if origin_allowed(
            origin=_single_header(scope, b"origin"),
            host=_single_header(scope, b"host"),
            secure=scope.get("scheme") == "wss",
        ):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)


class SameOriginHttp:
    """ASGI middleware for an HTTP app served outside Django (the MCP server at /mcp): its Host
    must pass ALLOWED_HOSTS, as Django's own requests must, and an Origin, when a browser sends
    one, must be the site's own or trusted: a page of another site cannot call it (the MCP
    specification asks servers to check Origin against DNS rebinding)."""

    def __init__(self, application) -> None:
        self.application = application

    async def __call__(self, scope, receive, send):
        host = _single_header(scope, b"host")
        if not (host and _host_allowed(host)):
            return await _refuse(send, 400, "This host is not served here.")
        origins = [value for key, value in scope.get("headers", []) if key == b"origin"]
        secure = scope.get("scheme") == "https"
        if origins and not (
            len(origins) == 1
            and origin_allowed(origin=origins[0].decode("latin-1"), host=host, secure=secure)
        ):
            return await _refuse(send, 403, "Requests from this origin are not accepted.")
        return await self.application(scope, receive, send)


async def _refuse(send, status: int, message: str) -> None:
    body = json.dumps({"detail": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def origin_allowed(*, origin: str | None, host: str | None, secure: bool) -> bool:
    """Return True if `origin` is the origin of a request to `host`, or a trusted origin."""
    if not origin:
        return False  # browsers always send it; only non-browser clients omit it
    if host and _host_allowed(host) and origin == f"{'https' if secure else 'http'}://{host}":
        return True
    trusted = settings.CSRF_TRUSTED_ORIGINS
    if origin in {pattern for pattern in trusted if "*" not in pattern}:
        return True
    try:
        parsed = urlsplit(origin)
    except ValueError:
        return False
    return any(
        is_same_domain(parsed.netloc, urlsplit(pattern).netloc.lstrip("*"))
        for pattern in trusted
        if "*" in pattern and urlsplit(pattern).scheme == parsed.scheme
    )


def _host_allowed(host: str) -> bool:
    """Return True if `host` passes ALLOWED_HOSTS, as `HttpRequest.get_host()` checks it."""
    allowed_hosts = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed_hosts:
        allowed_hosts = [".localhost", "127.0.0.1", "[::1]"]
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed_hosts)


def _single_header(scope, name: bytes) -> str | None:
    """Return the header's value, or None when it is absent or repeated (ASGI names are lower)."""
    values = [value for key, value in scope.get("headers", []) if key == name]
    return values[0].decode("latin-1") if len(values) == 1 else None
