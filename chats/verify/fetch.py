"""Fetch a cited web page safely and read its main text: a server requesting URLs an agent chose.

The rules (README, "Checking cited pages"):

- the address rules of `chats/outbound.py` (http(s) only, no credentials, cookies or proxy;
  every address checked, unless its host is in SOURCE_FETCH_ALLOWED_HOSTS, and connected to as
  checked), and the request says who it is (`USER_AGENT`);
- redirects are followed by hand, at most `MAX_REDIRECTS`, each hop through the same checks;
- a page gets `TIMEOUT_SECONDS` in all, `MAX_BYTES` of (decoded) body and only HTML or plain
  text; fewer than `MAX_CONCURRENT` fetches run at once in a process.

The main text is read by trafilatura (navigation, footers, scripts and asides left out), in a
worker thread: parsing a page costs milliseconds of CPU that the event loop must not spend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass, replace
from urllib.parse import urljoin

import httpx

from chats.loop.per_loop import PerLoop
from chats.outbound import Refused, Resolver, fetchable_url, guarded_client, system_resolve

USER_AGENT = "ResearchSite-SourceCheck/1.0 (reads pages cited in answers to check their figures)"
MAX_REDIRECTS = 5
TIMEOUT_SECONDS = 10.0
MAX_BYTES = 2 * 1024 * 1024
MAX_CONCURRENT = 8
MAX_TEXT_CHARS = 500_000  # of main text kept; an article is a few thousand
READABLE_TYPES = {"text/html": "html", "application/xhtml+xml": "html", "text/plain": "text"}


@dataclass(frozen=True, slots=True)
class FetchedPage:
    """What fetching one URL gave: its main text, or `problem` (one line) saying why not."""

    url: str
    final_url: str = ""
    status_code: int | None = None
    content_type: str = ""
    text: str = ""
    problem: str = ""


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
        self._allowed_hosts = allowed_hosts
        self._resolve = resolve
        self._client: httpx.AsyncClient | None = None

    async def __aenter__(self) -> PageFetcher:
        self._client = await guarded_client(
            allowed_hosts=self._allowed_hosts,
            resolve=self._resolve,
            timeout_seconds=self.timeout,
            max_connections=MAX_CONCURRENT,
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
            current = fetchable_url(current)
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
