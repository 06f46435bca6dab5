"""The page fetcher against a real HTTP server: what it reads of a page, and what it refuses to
ask for at all (the server records every request, so "never requested" is checked, not assumed)."""

from __future__ import annotations

import asyncio
import zlib
from urllib.parse import urlsplit

import pytest

from chats.outbound import address_problem
from chats.verify.fetch import USER_AGENT, PageFetcher, _CappedBody
from chats.verify.readers import PageReaders
from tests.servers import serve_asgi
from tests.standins.pages import (
    ABORT_MARKER,
    ARTICLE_HTML,
    ARTICLE_SENTENCE,
    MARGIN_SENTENCE,
    Page,
    PageSite,
    gzip_bomb,
    news_site,
    read_greedily,
    read_never,
    read_or_abort,
)


@pytest.fixture
def news():
    site = news_site()
    with serve_asgi(site) as url:
        site.url = url
        site.hostport = urlsplit(url).netloc
        yield site


@pytest.fixture
def intranet():
    """A second server on a private address that no test allows."""
    site = PageSite({"/secret": Page(body="<html><body><p>Payroll: $9 billion.</p></body></html>")})
    with serve_asgi(site) as url:
        site.url = url
        yield site


async def test_the_main_text_is_read_through_a_redirect_without_navigation_scripts_or_footer(news):
    news.pages["/grounding-api-redirect/AbC123"].headers["set-cookie"] = "session=abc; Path=/"
    async with PageFetcher(allowed_hosts=[news.hostport]) as fetcher:
        page = await fetcher.fetch(f"{news.url}/grounding-api-redirect/AbC123")

    assert page.problem == ""
    assert page.final_url == f"{news.url}/2026/11/acme-results"
    assert ARTICLE_SENTENCE in page.text
    assert MARGIN_SENTENCE in page.text
    assert "38" not in page.text  # in the scripts, the menu, the sidebar and the footer only
    assert "Privacy" not in page.text
    assert news.paths == ["/grounding-api-redirect/AbC123", "/2026/11/acme-results"]
    article = news.requests[1].headers
    assert article["user-agent"] == USER_AGENT
    assert "cookie" not in article  # the redirect's cookie is neither kept nor sent
    assert "authorization" not in article


async def test_a_loopback_page_is_never_requested_unless_its_host_is_allowed(news):
    async with PageFetcher(allowed_hosts=[]) as fetcher:
        page = await fetcher.fetch(f"{news.url}/2026/11/acme-results")
    assert page.problem == "refused: 127.0.0.1 is a loopback address"
    assert page.text == ""
    assert news.requests == []


async def test_an_allowed_host_redirecting_to_a_private_address_is_refused_at_that_hop(
    news, intranet
):
    # Allowed: the news site's host:port only; the intranet is on another port of 127.0.0.1.
    news.redirect("/out", f"{intranet.url}/secret")
    async with PageFetcher(allowed_hosts=[news.hostport]) as fetcher:
        page = await fetcher.fetch(f"{news.url}/out")
    assert page.problem == "refused: 127.0.0.1 is a loopback address"
    assert news.paths == ["/out"]
    assert intranet.requests == []


async def test_a_public_name_that_resolves_to_a_private_address_is_refused(news):
    async def resolve(host, port):
        return {"metadata.example": ["169.254.169.254"], "news.example": ["10.0.0.7"]}[host]

    async with PageFetcher(resolve=resolve) as fetcher:
        metadata = await fetcher.fetch("http://metadata.example/latest/meta-data/")
        private = await fetcher.fetch(f"http://news.example:{urlsplit(news.url).port}/x")
    assert metadata.problem == "refused: metadata.example is a link-local address"
    assert private.problem == "refused: news.example is a private address"
    assert news.requests == []


async def test_the_connection_goes_to_the_address_that_was_checked_with_the_host_named(news):
    """The name is resolved once, by the fetcher: the socket is opened to that address."""
    asked = []

    async def resolve(host, port):
        asked.append(host)
        return ["127.0.0.1"]

    port = urlsplit(news.url).port
    async with PageFetcher(allowed_hosts=[f"news.example:{port}"], resolve=resolve) as fetcher:
        page = await fetcher.fetch(f"http://news.example:{port}/2026/11/acme-results")
    assert page.problem == ""
    assert asked == ["news.example"]
    assert news.requests[0].headers["host"] == f"news.example:{port}"


@pytest.mark.parametrize(
    ("page", "problem"),
    [
        (Page(404, "<html><body>gone</body></html>"), "HTTP 404"),
        (Page(503, "busy"), "HTTP 503"),
        (Page(body=b"%PDF-1.7", headers={"content-type": "application/pdf"}),
         "not HTML or text (application/pdf)"),
        (Page(body="x" * 5000), "larger than 0 MiB"),
        (Page(body="<html><body><script>x()</script></body></html>"),
         "no readable text on the page"),
    ],
)  # fmt: skip
async def test_a_page_that_cannot_be_read_says_why_in_one_line(news, page, problem):
    news.pages["/p"] = page
    async with PageFetcher(allowed_hosts=[news.hostport], max_bytes=4096) as fetcher:
        fetched = await fetcher.fetch(f"{news.url}/p")
    assert fetched.problem == problem
    assert fetched.text == ""


async def test_a_declared_size_over_the_cap_is_refused_before_the_body_is_read(news):
    declared = {"content-type": "text/plain", "content-length": "5000"}
    news.pages["/big"] = Page(body="x" * 5000, headers=declared)
    async with PageFetcher(allowed_hosts=[news.hostport], max_bytes=4096) as fetcher:
        fetched = await fetcher.fetch(f"{news.url}/big")
    assert fetched.problem == "larger than 0 MiB"


async def test_a_plain_text_page_is_its_own_text(news):
    news.pages["/notes.txt"] = Page(
        body="Revenue rose 12% to $4.1 billion.\n", headers={"content-type": "text/plain"}
    )
    async with PageFetcher(allowed_hosts=[news.hostport]) as fetcher:
        fetched = await fetcher.fetch(f"{news.url}/notes.txt")
    assert fetched.text == "Revenue rose 12% to $4.1 billion."


async def test_a_page_slower_than_the_time_limit_gives_up(news):
    news.pages["/slow"] = Page(body="<p>late</p>", delay=3)
    async with PageFetcher(allowed_hosts=[news.hostport], timeout=0.2) as fetcher:
        fetched = await fetcher.fetch(f"{news.url}/slow")
    assert fetched.problem == "no answer within 0.2 s"


async def test_redirects_stop_after_five_hops(news):
    for hop in range(10):
        news.redirect(f"/hop{hop}", f"/hop{hop + 1}")
    async with PageFetcher(allowed_hosts=[news.hostport]) as fetcher:
        fetched = await fetcher.fetch(f"{news.url}/hop0")
    assert fetched.problem == "more than 5 redirects"
    assert len(news.requests) == 6


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://127.0.0.1:70/", "http:///x"]
)
async def test_only_http_and_https_links_are_followed(url):
    async with PageFetcher() as fetcher:
        fetched = await fetcher.fetch(url)
    assert fetched.problem.startswith("refused: not an http(s) link")


async def test_credentials_in_a_link_are_not_sent(news):
    user_url = news.url.replace("http://", "http://admin:hunter2@")
    async with PageFetcher(allowed_hosts=[news.hostport]) as fetcher:
        await fetcher.fetch(f"{user_url}/2026/11/acme-results")
    assert "authorization" not in news.requests[0].headers


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("127.0.0.1", "a loopback address"),
        ("::1", "a loopback address"),
        ("10.1.2.3", "a private address"),
        ("192.168.0.1", "a private address"),
        ("fd00::1", "a private address"),
        ("169.254.169.254", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("224.0.0.251", "a multicast address"),
        ("240.0.0.1", "a reserved address"),
        ("0.0.0.0", "a reserved address"),
        ("100.64.0.1", "a non-public address"),
        ("::ffff:192.168.1.1", "a private address"),
        ("93.184.216.34", ""),
        ("2606:2800:220:1::1", ""),
    ],
)
def test_only_public_addresses_may_be_fetched(address, problem):
    assert address_problem(address) == problem


# --- what a page's body may do: encodings, charsets, and its reader's process ---------------


async def test_a_gzipped_page_is_decompressed_and_read(news):
    packer = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    body = packer.compress(ARTICLE_HTML.encode()) + packer.flush()
    news.pages["/gz"] = Page(
        body=body, headers={"content-type": "text/html", "content-encoding": "gzip"}
    )
    async with PageFetcher(allowed_hosts=[news.hostport]) as fetcher:
        fetched = await fetcher.fetch(f"{news.url}/gz")
    assert fetched.problem == ""
    assert MARGIN_SENTENCE in fetched.text
    assert news.requests[0].headers["accept-encoding"] == "gzip, deflate"


@pytest.mark.parametrize(
    ("encoding", "body", "problem"),
    [
        # 269 bytes that are 16 MiB once decoded twice; one layer is refused before decoding.
        ("gzip, gzip", gzip_bomb(16 * 1024**2, layers=2),
         "more than one content encoding (gzip, gzip)"),
        ("gzip", gzip_bomb(16 * 1024**2), "larger than 2 MiB"),
        ("br", b"\x0b\x02\x80hello\x03", "an unsupported content encoding (br)"),
        ("gzip", b"not gzip at all", "a broken gzip body"),
    ],
)  # fmt: skip
async def test_a_compressed_body_is_capped_as_it_is_decoded(news, encoding, body, problem):
    """The cap holds on decoded bytes, counted as they are decompressed: the bomb stops at
    2 MiB, and the fetch stops reading there."""
    headers = {"content-type": "text/html", "content-encoding": encoding}
    news.pages["/bomb"] = Page(body=body, headers=headers)
    async with PageFetcher(allowed_hosts=[news.hostport]) as fetcher:
        fetched = await fetcher.fetch(f"{news.url}/bomb")
    assert (fetched.problem, fetched.text) == (problem, "")


def test_a_bomb_never_grows_past_the_cap_in_memory():
    """Each piece is decompressed only as far as the cap: 16 MiB of zeros arriving in one
    piece leave at most the cap and one byte decoded, never the whole."""
    body = _CappedBody(2 * 1024**2, "gzip")
    assert body.add(gzip_bomb(16 * 1024**2)) is False
    assert body.problem == "larger than 2 MiB"
    assert body.data == bytearray()
    small = _CappedBody(2 * 1024**2, "gzip")
    assert small.add(gzip_bomb(1024**2)) and small.finish()
    assert len(small.data) == 1024**2


@pytest.mark.parametrize(
    ("charset", "problem"),
    [
        ("rot13", "an unreadable character set (rot13)"),
        ("x-no-such-charset", "an unknown character set (x-no-such-charset)"),
    ],
)
async def test_a_page_declaring_a_charset_that_is_not_text_says_so(news, charset, problem):
    news.pages["/rot13"] = Page(
        body="<html><body><p>Erirahr ebfr 12%.</p></body></html>",
        headers={"content-type": f"text/html; charset={charset}"},
    )
    async with PageFetcher(allowed_hosts=[news.hostport]) as fetcher:
        fetched = await fetcher.fetch(f"{news.url}/rot13")
    assert (fetched.problem, fetched.text) == (problem, "")


async def test_a_declared_charset_is_used_to_read_the_page(news):
    news.pages["/latin1"] = Page(
        body="<html><body><article><p>Le chiffre d'affaires a progressé de 12 % à 4,1 milliards"
        " d'euros.</p></article></body></html>".encode("latin-1"),
        headers={"content-type": "text/html; charset=iso-8859-1"},
    )
    async with PageFetcher(allowed_hosts=[news.hostport]) as fetcher:
        fetched = await fetcher.fetch(f"{news.url}/latin1")
    assert "progressé de 12 %" in fetched.text


async def test_a_page_that_aborts_its_reader_fails_alone_and_the_next_page_is_read(news):
    """The reader aborts its process (as a parser's memory corruption does): that page says
    why, the server's process goes on, and the pool replaces the worker for the next pages."""
    news.pages["/abort"] = Page(body=ARTICLE_HTML + ABORT_MARKER.decode())
    async with PageFetcher(allowed_hosts=[news.hostport], reader=read_or_abort) as fetcher:
        aborted, good = await asyncio.gather(
            fetcher.fetch(f"{news.url}/abort"), fetcher.fetch(f"{news.url}/2026/11/acme-results")
        )
        again = await fetcher.fetch(f"{news.url}/2026/11/acme-results")
    assert (aborted.problem, aborted.text) == ("it stopped the process reading it", "")
    assert MARGIN_SENTENCE in good.text
    assert MARGIN_SENTENCE in again.text


async def test_a_reader_past_its_time_or_memory_cap_ends_and_the_page_says_why(news):
    readers = PageReaders(workers=1, seconds=1, memory_bytes=256 * 1024**2)
    url = f"{news.url}/2026/11/acme-results"
    read = {}
    try:
        for name, reader in [("stuck", read_never), ("greedy", read_greedily), ("good", None)]:
            async with PageFetcher(
                allowed_hosts=[news.hostport], readers=readers, reader=reader
            ) as fetcher:
                read[name] = await fetcher.fetch(url)
    finally:
        readers.close()
    assert read["stuck"].problem == "took longer than 1 s to read"
    assert read["greedy"].problem == "needed more than 256 MiB to read"
    assert MARGIN_SENTENCE in read["good"].text
