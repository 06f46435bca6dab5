"""Fetch a cited web page safely and read its main text: a server requesting URLs an agent chose.

The rules (README, "Checking cited pages"):

- the address rules of `chats/outbound.py` (http(s) only, no credentials, cookies or proxy;
  every address checked, unless its host is in SOURCE_FETCH_ALLOWED_HOSTS, and connected to as
  checked), and the request says who it is (`USER_AGENT`);
- redirects are followed by hand, at most `MAX_REDIRECTS`, each hop through the same checks;
- a page gets `TIMEOUT_SECONDS` in all and only HTML or plain text; its body is read as it
  arrives, decompressed here bit by bit (gzip or deflate, one encoding at most), and its decoded
  bytes are counted as they come: past `MAX_BYTES` the fetch stops, so a small compressed bomb
  never grows past the cap in memory;
- whatever goes wrong with one page (a refusal, a timeout, a broken encoding, an error of ours)
  is that page's `problem`: `fetch` never raises for a page.

The main text is read from the body in a helper process (`chats.verify.readers`): charset
decoding and trafilatura's extraction (navigation, footers, scripts and asides left out), out of
the server's process and under a memory and a time cap.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Collection
from dataclasses import dataclass, replace
from urllib.parse import urljoin

import httpx

from chats.outbound import Refused, Resolver, fetchable_url, guarded_client, system_resolve
from chats.verify import reading
from chats.verify.readers import PageReaders, Reader, page_readers

logger = logging.getLogger(__name__)

USER_AGENT = "ResearchSite-SourceCheck/1.0 (reads pages cited in answers to check their figures)"
MAX_REDIRECTS = 5
TIMEOUT_SECONDS = 10.0
MAX_BYTES = 2 * 1024 * 1024
MAX_CONNECTIONS = 16  # kept open by one fetcher (the check shares fetches out: `slots`)
READABLE_TYPES = {"text/html": "html", "application/xhtml+xml": "html", "text/plain": "text"}
# Content encodings decompressed here (and the only ones asked for), as zlib's window bits.
_ENCODINGS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


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
        readers: PageReaders | None = None,
        reader: Reader | None = None,
    ) -> None:
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._allowed_hosts = allowed_hosts
        self._resolve = resolve
        self._readers = readers
        self._reader = reader
        self._client: httpx.AsyncClient | None = None

    async def __aenter__(self) -> PageFetcher:
        self._client = await guarded_client(
            allowed_hosts=self._allowed_hosts,
            resolve=self._resolve,
            timeout_seconds=self.timeout,
            max_connections=MAX_CONNECTIONS,
            headers={
                "User-Agent": USER_AGENT,
                "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9",
                "Accept-Encoding": "gzip, deflate",
            },
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def fetch(self, url: str) -> FetchedPage:
        """Fetch `url` and read its main text; never raises for what the page does (only for
        its task being cancelled)."""
        try:
            async with asyncio.timeout(self.timeout):
                page, body, charset = await self._follow(url)
        except TimeoutError:
            return FetchedPage(url, problem=f"no answer within {self.timeout:g} s")
        except Refused as refused:
            return FetchedPage(url, problem=str(refused))
        except httpx.HTTPError as error:
            return FetchedPage(url, problem=_transport_problem(error))
        except Exception:
            logger.exception("Fetching %s failed", url)
            return FetchedPage(url, problem="the fetch failed on our side")
        if page.problem:
            return page
        readers = self._readers or page_readers()
        kind = READABLE_TYPES[page.content_type]
        reader = self._reader or reading.read_page
        text, problem = await readers.read(body, kind, charset, page.final_url, reader=reader)
        return replace(page, text=text, problem=problem)

    async def _follow(self, url: str) -> tuple[FetchedPage, bytes, str]:
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
    ) -> tuple[FetchedPage, bytes, str]:
        """Return the page as far as its headers go, and its body (decompressed bytes, at most
        `max_bytes`) and declared charset if it is to be read."""
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
        encodings = [
            e.strip().lower()
            for e in response.headers.get("content-encoding", "").split(",")
            if e.strip() and e.strip().lower() != "identity"
        ]
        if not problem and len(encodings) > 1:
            problem = f"more than one content encoding ({', '.join(encodings)})"
        elif not problem and encodings and encodings[0] not in _ENCODINGS:
            problem = f"an unsupported content encoding ({encodings[0]})"
        if problem:
            return replace(page, problem=problem), b"", ""
        body = _CappedBody(self.max_bytes, encodings[0] if encodings else "")
        async for piece in response.aiter_raw():
            if not body.add(piece):
                return replace(page, problem=body.problem), b"", ""
        if not body.finish():
            return replace(page, problem=body.problem), b"", ""
        return page, bytes(body.data), response.charset_encoding or ""


class _CappedBody:
    """A body as it arrives: decompressed piece by piece, never to more than `limit` bytes (a
    piece that would decompress further stops there), the raw bytes held to the same cap."""

    def __init__(self, limit: int, encoding: str) -> None:
        self.limit = limit
        self.data = bytearray()
        self.raw = 0
        self.problem = ""
        self._inflate = zlib.decompressobj(_ENCODINGS[encoding]) if encoding else None
        self._encoding = encoding

    def add(self, piece: bytes) -> bool:
        """Take one raw piece; False (with `problem`) once the body is over the cap or broken."""
        self.raw += len(piece)
        if self.raw > self.limit:
            return self._fail(_too_large(self.limit))
        if self._inflate is None:
            self.data += piece
        else:
            try:
                while piece:
                    room = self.limit - len(self.data) + 1
                    self.data += self._inflate.decompress(piece, room)
                    piece = self._inflate.unconsumed_tail
                    if len(self.data) > self.limit:
                        break
            except zlib.error:
                return self._fail(f"a broken {self._encoding} body")
        return len(self.data) <= self.limit or self._fail(_too_large(self.limit))

    def finish(self) -> bool:
        if self._inflate is not None:
            try:
                self.data += self._inflate.flush(self.limit - len(self.data) + 1)
            except zlib.error:
                return self._fail(f"a broken {self._encoding} body")
        return len(self.data) <= self.limit or self._fail(_too_large(self.limit))

    def _fail(self, problem: str) -> bool:
        self.problem = problem
        self.data = bytearray()
        return False


def _too_large(limit: int) -> str:
    return f"larger than {limit // (1024 * 1024)} MiB"


def _transport_problem(error: httpx.HTTPError) -> str:
    if isinstance(error, httpx.TimeoutException):
        return "no answer in time"
    if isinstance(error, httpx.ConnectError):
        return "could not connect"
    return "the connection failed"
