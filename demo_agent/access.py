"""Who may ask the demo agent mounted in the site: the site itself, and nobody else.

Open, the endpoint answered 3,141 anonymous questions in 20 s. A request now passes only when it
comes from a loopback address, names a Host the site serves (so no web page can reach it through
DNS rebinding) and carries the site's token in `X-API-KEY`, as the site sends a real key to the
real API. Refusals are the API's: 401 or 403 with a JSON `{"detail": ...}`.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Callable

from demo_agent.wire import Receive, Scope, Send, send_json

Asgi = Callable[[Scope, Receive, Send], object]


class SiteOnly:
    """Wrap an ASGI app so that only the site's own requests reach it."""

    def __init__(self, app: Asgi, *, token: str, host_allowed: Callable[[str], bool]) -> None:
        if not token:
            raise ValueError("The demo agent needs the site's token to tell the site apart.")
        self.app = app
        self._token = token.encode()
        self._host_allowed = host_allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (refusal := self._refusal(scope)) is not None:
            status, detail = refusal
            await send_json(send, status, {"detail": detail})
            return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        client = scope.get("client")
        if not client or not _is_loopback(client[0]):
            return 403, "The demo agent answers only the site it is part of"
        headers = dict(scope["headers"])  # a repeated header keeps its last value
        if not self._host_allowed(headers.get(b"host", b"").decode("latin-1")):
            return 403, "Host not allowed"
        key = headers.get(b"x-api-key", b"")
        if not hmac.compare_digest(key, self._token):
            return 401, "Missing or invalid API key"
        return None


def _is_loopback(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # "::ffff:127.0.0.1" from a dual-stack socket
    return ip.is_loopback
