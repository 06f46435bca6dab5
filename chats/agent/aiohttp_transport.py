"""httpx's API over aiohttp's connection: the transport of every streamed answer.

Why: reading a paced stream through httpx's own transport (httpcore, h11, anyio) cost
50-68 µs of CPU per event on this machine; through aiohttp's C-accelerated reader, 23
(docs/PERFORMANCE.md, "Every streamed read through aiohttp"). The clients keep httpx's API
(requests, responses, timeouts, the SDKs' `http_client`), so only this module knows aiohttp.

Each streamed answer reads its text with `aiter_text(response)`: straight from aiohttp when this
transport carries a plain UTF-8 body, so a read does not pass through httpx's four iterators of
its own (its stream, raw, bytes and text), which at one event per read cost ~6 µs of CPU per event
(docs/PERFORMANCE.md, "Every streamed read through aiohttp").

Not the `httpx-aiohttp` package: it maps a refused connection, and a server that hangs up
before answering, to `ConnectTimeout`, which would tell the analyst the agent was slow when it
was down. Here every aiohttp failure becomes the httpx error httpx's own transport raises for
it, so `providers.attempts.transport_failure` words it the same whichever transport ran.

The transports of one event loop share one aiohttp session (`new_session`, made and closed by
`chats.agent._http`): turns one after another reuse a connection rather than each opening one.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import functools
import ssl
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import aiohttp
import httpx
from aiohttp.client_proto import ResponseHandler

# First match wins: the specific classes come before the ones they derive from.
_ERRORS: tuple[tuple[type[BaseException], type[httpx.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
    (aiohttp.SocketTimeoutError, httpx.ReadTimeout),
    (aiohttp.ServerTimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientConnectorError, httpx.ConnectError),  # refused, DNS, TLS handshake
    (aiohttp.ServerFingerprintMismatch, httpx.ConnectError),
    (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),  # hung up before answering
    (aiohttp.ClientPayloadError, httpx.RemoteProtocolError),  # body cut short
    (aiohttp.ClientOSError, httpx.ReadError),  # reset mid-body
    (aiohttp.InvalidURL, httpx.UnsupportedProtocol),
    (aiohttp.ClientError, httpx.RemoteProtocolError),
)


@contextlib.contextmanager
def _as_httpx_errors(request: httpx.Request) -> Iterator[None]:
    try:
        yield
    except aiohttp.ClientError as error:
        for aiohttp_class, httpx_class in _ERRORS:
            if isinstance(error, aiohttp_class):
                raise httpx_class(str(error) or type(error).__name__, request=request) from error
        raise  # not reached: aiohttp.ClientError is the last entry


# An agent that keeps a read waiting PACED_WAIT or more is pacing its stream (a language model
# writing, say): until it bursts again (a read of BURST_BYTES or more that found its data
# waiting), the reader waits for the relay's next tick before each read, so that one read takes
# all that arrived meanwhile (chats.loop.ticks). An agent sending flat out is read as fast as it
# sends: its reads find data waiting, or wait microseconds for it (a stall of the loop may pace
# it until its next burst).
PACED_WAIT = 0.005
BURST_BYTES = 16 * 1024

# The relay's next tick (chats.loop.ticks.Ticks.wait): it calls the function given, if any, shortly
# before it comes.
Tick = Callable[[Callable[[], None] | None], Awaitable[None]]


class _ReadDeadline:
    """httpx's read timeout over a body: when the agent sends nothing for `seconds`, the read
    fails with aiohttp's SocketTimeoutError (httpx's ReadTimeout). aiohttp's own (`sock_read`)
    moves a timer for every packet, ~3.5 µs each on uvloop, and a paced agent sends each event
    in a packet of its own; this one is told of each read and looks once per `seconds`.

    Bytes waiting unread are never a stall: the reader is behind, not the agent (and aiohttp
    may have paused the connection until the reader takes them, as its own timer allows)."""

    def __init__(self, content: aiohttp.StreamReader, seconds: float) -> None:
        self._content = content
        self._seconds = seconds
        self._loop = asyncio.get_running_loop()
        self._taken = content.total_bytes  # what had arrived when the reader last read
        self._read_at = self._loop.time()  # when that was (or when the body began)
        self._timer = self._loop.call_at(self._read_at + seconds, self._check)

    def note_read(self) -> None:
        """The reader took all that had arrived."""
        self._taken, self._read_at = self._content.total_bytes, self._loop.time()

    def cancel(self) -> None:
        self._timer.cancel()

    def _check(self) -> None:
        content = self._content
        if content.is_eof() or content.exception() is not None:
            return
        now = self._loop.time()
        if content.total_bytes != self._taken:  # bytes wait for the reader
            self._timer = self._loop.call_at(now + self._seconds, self._check)
        elif now - self._read_at >= self._seconds:
            content.set_exception(aiohttp.SocketTimeoutError("Timeout on reading data from socket"))
        else:
            self._timer = self._loop.call_at(self._read_at + self._seconds, self._check)


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(
        self,
        response: aiohttp.ClientResponse,
        request: httpx.Request,
        tick: Tick | None,
        read_timeout: float | None,
        protocol: ResponseHandler | None,
    ) -> None:
        self._response = response
        self._request = request
        self._tick = tick
        self._read_timeout = read_timeout
        # What a paced read calls to hold its socket until the tick, and to let it go: only
        # our protocol's, and only over plain TCP (`_ConnectionProtocol.holds_the_socket`).
        holds = isinstance(protocol, _ConnectionProtocol) and protocol.holds_the_socket()
        self._hold = protocol.hold_reading if holds else None
        self._release = protocol.release_reading if holds else None

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._reads()

    async def aiter_text(self) -> AsyncIterator[str]:
        """The body as UTF-8 text, as it arrives; bad bytes become U+FFFD, as httpx decodes."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        async with contextlib.aclosing(self._reads()) as reads:  # closed when this is
            async for chunk in reads:
                if text := decoder.decode(chunk):
                    yield text
        if text := decoder.decode(b"", final=True):
            yield text

    async def _reads(self) -> AsyncIterator[bytes]:
        """What has arrived, at once; a paced stream once per tick. Between two reads of a
        paced stream over plain TCP its socket is held, so that the kernel gathers the agent's
        packets, and read again just before the tick (`Ticks.wait(before=)`): one read for the
        tick's events rather than one per packet (docs/PERFORMANCE.md, "A paced stream's
        socket is held between ticks"). Bytes held in the kernel are not seen by the read deadline,
        which a window far under any read timeout makes no matter."""
        content = self._response.content
        tick = self._tick
        paced = False
        hold, release = self._hold, self._release
        deadline = _ReadDeadline(content, self._read_timeout) if self._read_timeout else None
        try:
            with _as_httpx_errors(self._request):
                chunk = await content.readany()  # not judged: it waits for the agent to start
                while chunk:
                    if deadline is not None:
                        deadline.note_read()
                    yield chunk
                    if paced and not content.is_eof():
                        if hold is not None:
                            hold()
                        await tick(release)
                    asked = time.perf_counter()
                    chunk = await content.readany()
                    if time.perf_counter() - asked >= PACED_WAIT:
                        paced = tick is not None
                    elif len(chunk) >= BURST_BYTES:
                        paced = False
        finally:
            if deadline is not None:
                deadline.cancel()

    async def aclose(self) -> None:
        # A body not read to its end closes the connection: the agent sees the page stop.
        self._response.release()


_BODY = "researchsite.aiohttp_body"  # the key of the body's _ResponseStream in extensions


def _utf8_body(response: httpx.Response) -> bool:
    return (response.charset_encoding or "utf-8").lower() in {"utf-8", "utf8"}


def _raw_body(response: httpx.Response) -> _ResponseStream | None:
    """This transport's body when httpx would pass its bytes on as they are (no
    Content-Encoding to decode)."""
    body = response.extensions.get(_BODY)
    plain = response.headers.get("Content-Encoding", "identity").lower() == "identity"
    return body if isinstance(body, _ResponseStream) and plain else None


def aiter_body(response: httpx.Response) -> AsyncIterator[bytes] | AsyncIterator[str]:
    """The body as a streamed answer's reader takes it (`chats.agent.sse`): its UTF-8 bytes as
    they arrive, straight from aiohttp when this transport carries them (no layer of httpx's,
    no copy, no decoding: the reader decodes each line once); text for another charset."""
    if not _utf8_body(response):
        return response.aiter_text()
    body = _raw_body(response)
    return body._reads() if body is not None else response.aiter_bytes()


def aiter_text(response: httpx.Response) -> AsyncIterator[str]:
    """`response.aiter_text()`, read straight from aiohttp when this transport carries the body
    and httpx would only have decoded it as UTF-8 (no Content-Encoding, no other charset)."""
    body = _raw_body(response)
    if body is not None and _utf8_body(response):
        return body.aiter_text()
    return response.aiter_text()


@functools.cache
def environment_proxies() -> dict[str, str]:
    """HTTP_PROXY, HTTPS_PROXY, NO_PROXY and the like, read once per process as the settings
    are: reading them walked the whole environment, ~90 µs a request."""
    return urllib.request.getproxies_environment()


def _environment_proxy(url: httpx.URL) -> str | None:
    """HTTP(S)_PROXY unless NO_PROXY covers the host, by urllib's rules (unlike httpx's own
    transport, ALL_PROXY is not used)."""
    proxies = environment_proxies()
    if not proxies or urllib.request.proxy_bypass_environment(url.host, proxies):
        return None
    return proxies.get(url.scheme)


# Under uvicorn's idle timeout (5 s; it serves the demo agent), so that a request rarely meets a
# connection the server is closing. If one does, aiohttp does not resend a POST: the turn sees a
# connection dropped before the answer, which `providers.attempts` retries on a new connection.
# Under load turns come well within this of each other, which is when reuse matters.
KEEPALIVE_SECONDS = 4.0


class _ConnectionProtocol(ResponseHandler):
    """aiohttp's protocol for a connection, without a resume for every chunk read, and with a
    hold on the socket that the reader of a paced stream takes between two ticks.

    aiohttp 3.14's reader asks the protocol to resume reading whenever it takes a chunk from a
    buffer below its low-water mark, paused or not: a call into the parser with no bytes and
    one into the transport, ~2 µs, for every event of a paced stream (docs/PERFORMANCE.md,
    "The body's read deadline"). Resuming what is not paused does nothing else, so it is skipped.

    The hold stops reading the socket without touching aiohttp's own flow control (its
    `_reading_paused` and `_buffer_paused`): the socket is read again once neither holds it.
    """

    _held = False

    def holds_the_socket(self) -> bool:
        """Whether `hold_reading` leaves the bytes in the kernel: on plain TCP only.

        Over TLS, pausing stops only what the TLS layer hands on, while it goes on reading the
        socket, so the kernel gathers nothing; and uvloop's TLS layer drops what it holds when
        the agent closes the connection meanwhile (the last events of a body delimited by the
        close would be lost, with no error). A stream over TLS is not held: aiohttp buffers it
        between two ticks.
        """
        transport = self.transport
        return transport is not None and transport.get_extra_info("sslcontext") is None

    def hold_reading(self) -> None:
        """Leave what arrives in the kernel's buffer until `release_reading`."""
        if not self._held:
            self._held = True
            self._pause_transport_reading()

    def release_reading(self) -> None:
        if self._held:
            self._held = False
            if not (self._reading_paused or self._buffer_paused):
                self._resume_transport_reading()

    def _resume_transport_reading(self) -> None:
        if not self._held:
            super()._resume_transport_reading()

    def resume_reading(self, resume_parser: bool = True) -> None:
        if self._reading_paused or self._buffer_paused:
            super().resume_reading(resume_parser)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._held = False  # nothing left to hold (a held body is unfinished: never pooled)
        super().connection_lost(exc)


def new_session(ssl_context: ssl.SSLContext) -> aiohttp.ClientSession:
    """A pool of connections to the agents, for one event loop; whoever makes it closes it.

    Connections are kept alive between turns, so a turn reuses the one the last turn left
    (no TCP connect, no TLS handshake). The pool holds no cookies and sets no limit of its own:
    every turn's request is as it would be over a connection of its own. An idle connection is
    closed after KEEPALIVE_SECONDS.
    """
    connector = aiohttp.TCPConnector(
        ssl=ssl_context,
        limit=0,  # no cap on how many turns stream at once (aiohttp's default is 100)
        keepalive_timeout=KEEPALIVE_SECONDS,
    )
    # aiohttp takes no protocol class of ours but through this attribute (pinned, and tested).
    connector._factory = functools.partial(_ConnectionProtocol, loop=asyncio.get_running_loop())
    return aiohttp.ClientSession(
        connector=connector,
        cookie_jar=aiohttp.DummyCookieJar(),  # one turn's cookies never reach another's request
        auto_decompress=False,  # httpx decodes the body, by its Content-Encoding
        trust_env=False,  # no ~/.netrc credentials (httpx sends none); proxies below
    )


class AiohttpTransport(httpx.AsyncBaseTransport):
    """httpx requests over `session`'s connections; closing the transport leaves it open."""

    def __init__(self, session: aiohttp.ClientSession, *, tick: Tick | None = None) -> None:
        self._session = session
        self._tick = tick  # reads a paced stream once per tick when given (chats.loop.ticks)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeout = request.extensions.get("timeout", {})
        body = await request.aread()
        headers = [
            (name, value)
            for name, value in request.headers.multi_items()
            if name.lower() not in {"content-length", "transfer-encoding"}  # aiohttp sets them
        ]
        url = request.url
        if url.userinfo:  # httpx made the Authorization header of them (a copy: ~20 µs)
            url = url.copy_with(username=None, password=None)
        with _as_httpx_errors(request):
            response = await self._session.request(
                request.method,
                str(url),
                proxy=_environment_proxy(url),
                headers=headers,
                data=body or None,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(  # `connect` covers the DNS lookup, as httpx's does
                    total=None,
                    connect=timeout.get("connect"),
                    sock_connect=timeout.get("connect"),
                    sock_read=timeout.get("read"),
                ),
            )
        protocol = response.connection and response.connection.protocol
        if protocol is not None:
            # The body's read timeout is _ReadDeadline's: aiohttp's timed the wait for the head.
            protocol.read_timeout = None
        stream = _ResponseStream(response, request, self._tick, timeout.get("read"), protocol)
        extensions = {"http_version": b"HTTP/1.1", _BODY: stream}
        if response.reason:
            extensions["reason_phrase"] = response.reason.encode()
        return httpx.Response(
            status_code=response.status,
            headers=list(response.raw_headers),
            stream=stream,
            extensions=extensions,
        )

    async def aclose(self) -> None:
        """Nothing to close: the session outlives each httpx client (see `new_session`)."""
