"""Fetch a cited web page safely and read its main text: a server requesting URLs an agent chose.

The rules (README, "Checking cited pages"):

- only `http` and `https`; credentials in a URL are dropped, no cookies are kept or sent, and the
  request says who it is (`USER_AGENT`);
- every host name is resolved here and refused when any of its addresses is loopback, private,
  link-local (cloud metadata at 169.254.169.254), multicast, reserved or otherwise not global,
  unless the host (or host:port) is listed in SOURCE_FETCH_ALLOWED_HOSTS; the connection is then
  made to the address that was checked (`_GuardedBackend`, below httpcore: TLS still names the
  host), so a name that answers differently the second time cannot slip past;
- redirects are followed by hand, at most `MAX_REDIRECTS`, each hop through the same checks;
- a page gets `TIMEOUT_SECONDS` in all, `MAX_BYTES` of (decoded) body and only HTML or plain
  text; fewer than `MAX_CONCURRENT` fetches run at once in a process;
- no proxy: a proxy would connect in our place, past the address check.

The main text is read by trafilatura (navigation, footers, scripts and asides left out), in a
worker thread: parsing a page costs milliseconds of CPU that the event loop must not spend.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, replace
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpcore
import httpx

from chats.loop.per_loop import PerLoop

USER_AGENT = "ResearchSite-SourceCheck/1.0 (reads pages cited in answers to check their figures)"
MAX_REDIRECTS = 5
TIMEOUT_SECONDS = 10.0
MAX_BYTES = 2 * 1024 * 1024
MAX_CONCURRENT = 8
MAX_TEXT_CHARS = 500_000  # of main text kept; an article is a few thousand
READABLE_TYPES = {"text/html": "html", "application/xhtml+xml": "html", "text/plain": "text"}

Resolver = Callable[[str, int], Awaitable[list[str]]]


@dataclass(frozen=True, slots=True)
class FetchedPage:
    """What fetching one URL gave: its main text, or `problem` (one line) saying why not."""

    url: str
    final_url: str = ""
    status_code: int | None = None
    content_type: str = ""
    text: str = ""
    problem: str = ""


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


class _GuardedBackend(httpcore.AsyncNetworkBackend):
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


class PageFetcher:
    """Fetches pages under the rules above; one per check of a turn (its connections pooled)."""

    def __init__(
        self,
        *,
        allowed_hosts: Collection[str] = (),
        resolve: Resolver = system_resolve,
        timeout: float = TIMEOUT_SECONDS,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._backend = _GuardedBackend(allowed_hosts, resolve)
        self._client: httpx.AsyncClient | None = None

    async def __aenter__(self) -> PageFetcher:
        # Loading the CA bundle takes tens of ms of CPU: once per process, off the event loop.
        ssl_context = await asyncio.to_thread(_ssl_context)
        transport = httpx.AsyncHTTPTransport(retries=0)
        # httpx has no option for a network backend; its pool is httpcore's, which has.
        transport._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=MAX_CONCURRENT,
            network_backend=self._backend,
            retries=0,
        )
        self._client = httpx.AsyncClient(
            transport=transport,
            follow_redirects=False,
            trust_env=False,  # no proxy, no .netrc credentials
            cookies=_no_cookies(),
            timeout=httpx.Timeout(self.timeout),
            headers={
                "User-Agent": USER_AGENT,
                "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9",
            },
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def fetch(self, url: str) -> FetchedPage:
        """Fetch `url` and read its main text; never raises for what the page does."""
        async with concurrency():
            try:
                async with asyncio.timeout(self.timeout):
                    page, body = await self._follow(url)
            except TimeoutError:
                return FetchedPage(url, problem=f"no answer within {self.timeout:g} s")
            except Refused as refused:
                return FetchedPage(url, problem=str(refused))
            except httpx.HTTPError as error:
                return FetchedPage(url, problem=_transport_problem(error))
        if page.problem:
            return page
        return await asyncio.to_thread(_with_main_text, page, body)

    async def _follow(self, url: str) -> tuple[FetchedPage, str]:
        assert self._client is not None, "use PageFetcher as an async context manager"
        current = url
        for _hop in range(MAX_REDIRECTS + 1):
            current = _fetchable(current)
            async with self._client.stream("GET", current) as response:
                if response.is_redirect and "location" in response.headers:
                    current = urljoin(current, response.headers["location"])
                    continue
                return await self._read(url, current, response)
        raise Refused(f"more than {MAX_REDIRECTS} redirects")

    async def _read(
        self, url: str, final: str, response: httpx.Response
    ) -> tuple[FetchedPage, str]:
        """Return the page as far as its headers go, and its body (decoded text) if readable."""
        status = response.status_code
        content_type = response.headers.get("content-type", "")
        media = content_type.split(";", 1)[0].strip().lower()
        page = FetchedPage(url, final_url=final, status_code=status, content_type=media)
        problem = ""
        declared = response.headers.get("content-length", "")
        if status >= 400:
            problem = f"HTTP {status}"
        elif status != 200:
            problem = f"HTTP {status}, not a page"
        elif media not in READABLE_TYPES:
            problem = f"not HTML or text ({media or 'no type'})"
        elif declared.isdigit() and int(declared) > self.max_bytes:
            problem = _too_large(self.max_bytes)
        if problem:
            return replace(page, problem=problem), ""
        body = bytearray()
        async for piece in response.aiter_bytes():  # decoded: a compressed bomb counts in full
            body += piece
            if len(body) > self.max_bytes:
                return replace(page, problem=_too_large(self.max_bytes)), ""
        return page, body.decode(response.encoding or "utf-8", "replace")


def _with_main_text(page: FetchedPage, body: str) -> FetchedPage:
    """Return the page with its main text, read from its body (worker thread)."""
    import trafilatura  # 0.2 s to import: only processes that check pages pay it

    if READABLE_TYPES[page.content_type] == "html":
        text = trafilatura.extract(
            body, url=page.final_url, include_comments=False, include_tables=True
        )
    else:
        text = body
    text = (text or "").strip()[:MAX_TEXT_CHARS]
    return replace(page, text=text, problem="" if text else "no readable text on the page")


def _fetchable(url: str) -> str:
    """Return the URL to request: http(s) only, without any user:password part."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError as error:
        raise Refused("refused: not a valid link") from error
    if parts.scheme not in ("http", "https") or not host:
        raise Refused(f"refused: not an http(s) link ({parts.scheme or 'no scheme'})")
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))


def _too_large(limit: int) -> str:
    return f"larger than {limit // (1024 * 1024)} MiB"


def _transport_problem(error: httpx.HTTPError) -> str:
    if isinstance(error, httpx.TimeoutException):
        return "no answer in time"
    if isinstance(error, httpx.ConnectError):
        return "could not connect"
    return "the connection failed"


# At most MAX_CONCURRENT pages are fetched at once by this event loop (a serving process has one).
_slots = PerLoop(lambda: asyncio.Semaphore(MAX_CONCURRENT))


def concurrency() -> asyncio.Semaphore:
    return _slots()
