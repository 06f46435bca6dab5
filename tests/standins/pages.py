"""A stand-in web site for the page fetcher: real-looking news pages (navigation, scripts, a
sidebar, a footer), a redirect like Gemini's grounding links, and the ways a page fails.

Every request is recorded (`requests`: method, path, headers), so a test can tell that a page
was never asked for. Served by `tests.servers.serve_asgi` on 127.0.0.1.

Also hostile pages (`gzip_bomb`) and page readers that misbehave in their helper process, for
the tests of `chats.verify.readers`: they are passed to the pool (or put in place of
`chats.verify.reading.read_page`) and run in the helper, which imports them from here.
"""

from __future__ import annotations

import asyncio
import os
import threading
import zlib
from dataclasses import dataclass, field

from chats.verify.reading import read_page
from demo_agent.scripted import client_left_within

ARTICLE_SENTENCE = (
    "Acme Corp said on Tuesday that quarterly revenue rose 12% to $4.1 billion, helped by"
    " demand for its cloud services."
)
MARGIN_SENTENCE = "Gross margin widened to 31.5% from 29.8% a year earlier, the company said."

ARTICLE_HTML = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Acme's revenue rises on cloud demand</title>
<script>window.dataLayer = []; function promo() {{ return "Gross margin 38% off today"; }}</script>
<style>.promo {{ color: red }}</style></head>
<body>
<header><nav><ul><li><a href="/">Home</a></li><li><a href="/markets">Markets</a></li>
<li><a href="/tech">Technology</a></li><li><a href="/subscribe">Subscribe: 38% off</a></li></ul>
</nav></header>
<main><article>
<h1>Acme's quarterly revenue rises on cloud demand</h1>
<p class="byline">By Jane Doe, November 3, 2026</p>
<p>{ARTICLE_SENTENCE}</p>
<p>{MARGIN_SENTENCE} Operating expenses were flat.</p>
<p>The company expects next-quarter revenue between $4.2 billion and $4.4 billion, above
analysts' estimates.</p>
<p>Shares rose in after-hours trading after the results were published on its website.</p>
</article></main>
<aside><h2>Most read</h2><ul><li><a href="/rival">Rival's gross margin hits 38%</a></li></ul>
</aside>
<footer><p>&copy; 2026 Example News. All rights reserved. 38 Main Street.</p>
<a href="/privacy">Privacy</a> <a href="/terms">Terms</a></footer>
<script>console.log("margin 38%");</script>
</body></html>
"""

# The same article, saying nothing of margins: no sentence of it shares a word with a margin claim.
ARTICLE_WITHOUT_MARGINS_HTML = ARTICLE_HTML.replace(f"{MARGIN_SENTENCE} ", "")


@dataclass
class Page:
    status: int = 200
    body: bytes | str = b""
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "text/html"})
    delay: float = 0.0  # seconds before the body, to try the time limit
    # Set: the body waits until the test sets it (a page still loading while the test looks).
    held: threading.Event | None = None


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]


class PageSite:
    """An ASGI app serving `pages` by path; anything else is a 404 page."""

    def __init__(self, pages: dict[str, Page] | None = None) -> None:
        self.pages = dict(pages or {})
        self.requests: list[Seen] = []

    @property
    def paths(self) -> list[str]:
        return [r.path for r in self.requests]

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        self.pages[path] = Page(status=status, headers={"location": location})

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        query = scope["query_string"].decode()
        path = scope["path"] + (f"?{query}" if query else "")
        self.requests.append(Seen(scope["method"], path, headers))
        page = self.pages.get(path) or Page(404, "<html><body><p>Not found</p></body></html>")
        body = page.body.encode() if isinstance(page.body, str) else page.body
        raw = [(k.encode(), v.encode()) for k, v in page.headers.items()]
        await send({"type": "http.response.start", "status": page.status, "headers": raw})
        if page.delay and await client_left_within(receive, page.delay):
            return  # the fetcher gave up: nobody to send the page to
        if page.held is not None:
            await asyncio.to_thread(page.held.wait, 60)
        await send({"type": "http.response.body", "body": body})


def news_site() -> PageSite:
    """The article, reached directly and through a grounding-style redirect."""
    site = PageSite({"/2026/11/acme-results": Page(body=ARTICLE_HTML)})
    site.redirect("/grounding-api-redirect/AbC123", "/2026/11/acme-results")
    return site


ABORT_MARKER = b"<!-- this page aborts its reader -->"


def read_or_abort(body: bytes, kind: str, charset: str, url: str) -> tuple[str, str]:
    """The real reader, but a page carrying `ABORT_MARKER` aborts the process reading it (as a
    parser's memory corruption would)."""
    if ABORT_MARKER in body:
        os.abort()
    return read_page(body, kind, charset, url)


def read_never(body: bytes, kind: str, charset: str, url: str) -> tuple[str, str]:
    """A reader that never finishes: a pathological page."""
    threading.Event().wait()
    return "", ""


def read_greedily(body: bytes, kind: str, charset: str, url: str) -> tuple[str, str]:
    """A reader that wants 4 GiB for a page."""
    hog = bytearray(4 * 1024**3)
    return str(len(hog)), ""


def gzip_bomb(decoded_bytes: int, layers: int = 1) -> bytes:
    """Zeros that decompress to `decoded_bytes`, gzipped `layers` times (a few KB sent)."""
    body = b""
    for layer in range(layers):
        packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        if layer == 0:
            block = bytes(1024 * 1024)
            parts = [packer.compress(block) for _ in range(decoded_bytes // len(block))]
        else:
            parts = [packer.compress(body)]
        body = b"".join(parts) + packer.flush()
    return body
