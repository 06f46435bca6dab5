"""Requests to URLs that someone else chose (a page an agent cited, a webhook's endpoint): the
address rules every such request obeys.

- only `http` and `https`; credentials in a URL are dropped, no cookies are kept or sent, no
  proxy (a proxy would connect in our place, past the address check) and no .netrc;
- every host name is resolved here and refused when any of its addresses is loopback, private,
  link-local (cloud metadata at 169.254.169.254), multicast, reserved or otherwise not global,
  unless the host (or host:port) is listed as allowed; the connection is then made to the
  address that was checked (`GuardedBackend`, below httpcore: TLS still names the host), so a
  name that answers differently the second time cannot slip past;
- a URL is checked before any request (`fetchable_url`): it must parse as the HTTP client will
  read it, and a host made only of digits, dots and hex ("0177.0.0.1", "0x7f.1", "2130706433")
  is refused unless it is a plain dotted quad, since resolvers read such forms differently;
- redirects are not followed by the client: a caller that follows them checks each hop with
  `fetchable_url`, and its connection goes through the same backend.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import re
import socket
import ssl
from collections.abc import Awaitable, Callable, Collection, Mapping
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpcore
import httpx

Resolver = Callable[[str, int], Awaitable[list[str]]]


class Refused(Exception):
    """The URL or an address it leads to may not be fetched; the message says why."""


async def system_resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, by the system's resolver."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [info[4][0] for info in infos]


def address_problem(address: str) -> str:
    """Return why an address may not be fetched ("" when it may): anything not public."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for kind, test in (
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved or ip.is_unspecified),
        ("private", ip.is_private),
    ):
        if test:
            return f"a {kind} address"
    return "" if ip.is_global else "a non-public address"


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolve, check, then connect to the checked address: the one place a socket is opened."""

    def __init__(self, allowed_hosts: Collection[str], resolve: Resolver) -> None:
        self._allowed = {h.strip().lower() for h in allowed_hosts if h.strip()}
        self._resolve = resolve
        self._inner = httpcore.AnyIOBackend()

    def is_allowed(self, host: str, port: int) -> bool:
        host = host.lower().strip("[]")
        return host in self._allowed or f"{host}:{port}" in self._allowed

    async def checked_address(self, host: str, port: int) -> str:
        try:
            addresses = await self._resolve(host, port)
        except OSError as error:
            raise Refused(f"the host {host} could not be found") from error
        if not addresses:
            raise Refused(f"the host {host} could not be found")
        if not self.is_allowed(host, port):
            for address in addresses:
                if problem := address_problem(address):
                    raise Refused(f"refused: {host} is {problem}")
        return addresses[0]

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        address = await self.checked_address(host, port)
        return await self._inner.connect_tcp(
            address, port, timeout=timeout, local_address=local_address
        )

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        raise Refused("refused: not a network address")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()


def _no_cookies() -> CookieJar:
    """A jar that neither keeps nor sends any cookie (a redirect hop cannot set one)."""
    return CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))


async def guarded_client(
    *,
    allowed_hosts: Collection[str] = (),
    resolve: Resolver = system_resolve,
    timeout_seconds: float,
    max_connections: int,
    headers: Mapping[str, str],
) -> httpx.AsyncClient:
    """An httpx client whose every connection goes through `GuardedBackend`; close it after use."""
    # Loading the CA bundle takes tens of ms of CPU: once per process, off the event loop.
    ssl_context = await asyncio.to_thread(_ssl_context)
    transport = httpx.AsyncHTTPTransport(retries=0)
    # httpx has no option for a network backend; its pool is httpcore's, which has.
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=ssl_context,
        max_connections=max_connections,
        network_backend=GuardedBackend(allowed_hosts, resolve),
        retries=0,
    )
    return httpx.AsyncClient(
        transport=transport,
        follow_redirects=False,
        trust_env=False,  # no proxy, no .netrc credentials
        cookies=_no_cookies(),
        timeout=httpx.Timeout(timeout_seconds),
        headers=dict(headers),
    )


# A host that is numbers only (decimal, octal "0177", hex "0x7f", dotted or not): an address.
_NUMERIC_HOST = re.compile(r"(?:0x[0-9a-f]*|\d+)(?:\.(?:0x[0-9a-f]*|\d+))*\.?", re.IGNORECASE)


def fetchable_url(url: str) -> str:
    """Return the URL to request: http(s) only, without any user:password part; raise Refused
    for anything else, and for a URL the HTTP client could not read."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError as error:
        raise Refused("refused: not a valid link") from error
    if parts.scheme not in ("http", "https") or not host:
        raise Refused(f"refused: not an http(s) link ({parts.scheme or 'no scheme'})")
    if _NUMERIC_HOST.fullmatch(host) and not _is_dotted_quad(host):
        raise Refused(f"refused: {host} is an address written in a non-standard form")
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    fetchable = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
    try:
        httpx.URL(fetchable)
    except httpx.InvalidURL as error:
        raise Refused("refused: not a valid link") from error
    return fetchable


def _is_dotted_quad(host: str) -> bool:
    """True for "93.184.215.14", the one way of writing an IPv4 address every reader agrees on."""
    try:
        return str(ipaddress.IPv4Address(host)) == host
    except ValueError:
        return False


async def checked_url(
    url: str, *, allowed_hosts: Collection[str] = (), resolve: Resolver = system_resolve
) -> str:
    """The URL to request (`fetchable_url`) once its host passes the address rules, else
    Refused: for a URL checked when it is saved (a webhook's endpoint). Its requests are checked
    again as they connect (`guarded_client`): a name may answer differently later."""
    url = fetchable_url(url)
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    await GuardedBackend(allowed_hosts, resolve).checked_address(parts.hostname or "", port)
    return url
