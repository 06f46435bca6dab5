"""The aiohttp transport fails as httpx's own does: each fault, on a real socket, raises the same
httpx error through both, so the analyst is told the same thing whichever transport ran."""

from __future__ import annotations

import asyncio
import gzip
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest
import trustme
import uvloop
from aiohttp.base_protocol import BaseProtocol

from chats.agent import aiohttp_transport, close_http_sessions, http_transport, ssl_context
from chats.agent.aiohttp_transport import (
    AiohttpTransport,
    _ConnectionProtocol,
    aiter_body,
    aiter_text,
    environment_proxies,
    new_session,
)
from chats.loop.ticks import Ticks
from chats.run.lifespan import shut_down
from tests.servers import free_port
from tests.waiting import wait_until

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
HEADERS = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)
EVENT = b'data: {"type": "ANSWER", "content": "part"}\n\n'


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@asynccontextmanager
async def raw_server(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    """A TCP server (over TLS with `tls`) that reads the request head, then does what
    `handler` says."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}/stream"


async def hang_up(reader, writer) -> None:
    pass  # closes before a byte of the response


async def cut_mid_body(reader, writer) -> None:
    writer.write(HEADERS + chunk(EVENT))
    await writer.drain()


async def reset_mid_body(reader, writer) -> None:
    writer.write(HEADERS + chunk(EVENT))
    await writer.drain()
    raw = writer.get_extra_info("socket")
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close


async def stall_before_answering(reader, writer) -> None:
    await reader.read()  # silent until the client gives up and leaves


async def stall_mid_body(reader, writer) -> None:
    writer.write(HEADERS + chunk(EVENT))
    await writer.drain()
    await reader.read()  # silent until the client gives up and leaves


async def stall_after_events(reader, writer) -> None:
    """Silent after events that came apart from the head: only the body's timeout can tell."""
    writer.write(HEADERS)
    for _ in range(2):
        await writer.drain()
        await asyncio.sleep(0.1)
        writer.write(chunk(EVENT))
    await writer.drain()
    await reader.read()  # silent until the client gives up and leaves


async def answer_in_full(reader, writer) -> None:
    writer.write(HEADERS + chunk(EVENT) + chunk(EVENT) + b"0\r\n\r\n")
    await writer.drain()


TRANSPORTS = {
    "httpx": lambda: httpx.AsyncHTTPTransport(),
    "aiohttp": http_transport,
}


async def as_bytes(response: httpx.Response) -> list[bytes]:
    return [part async for part in response.aiter_bytes()]


async def as_text(response: httpx.Response) -> list[bytes]:
    """What the clients read: httpx's text, decoded from what the transport gives it."""
    return [part.encode() async for part in response.aiter_text()]


async def as_read(response: httpx.Response) -> list[bytes]:
    """`aiter_text(response)`: text, straight from aiohttp when it can."""
    return [part.encode() async for part in aiter_text(response)]


async def as_body(response: httpx.Response) -> list[bytes]:
    """What the clients read: `aiter_body(response)`, the bytes straight from aiohttp when it
    can (text for another charset)."""
    return [
        part if isinstance(part, bytes) else part.encode() async for part in aiter_body(response)
    ]


READERS = {"aiter_bytes": as_bytes, "aiter_text": as_text, "clients": as_read, "body": as_body}


async def read_body(
    url: str, transport: httpx.AsyncBaseTransport, reader=as_bytes, read_timeout: float = 10.0
) -> list[bytes]:
    # A body is read whole unless a test sets a read timeout to see one end it: a busy machine
    # can stall a paced body's reads for more than half a second.
    timeout = httpx.Timeout(connect=2.0, read=read_timeout, write=2.0, pool=2.0)
    async with (
        httpx.AsyncClient(timeout=timeout, transport=transport) as client,
        client.stream("POST", url, json={"message": "q"}) as response,
    ):
        assert response.status_code == 200
        return await reader(response)


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("name", TRANSPORTS)
async def test_a_whole_answer_arrives_through_either(name, reader):
    async with raw_server(answer_in_full) as url:
        assert b"".join(await read_body(url, TRANSPORTS[name](), READERS[reader])) == EVENT * 2


async def split_character(reader, writer) -> None:
    """ "€" (3 bytes in UTF-8) cut across two writes, and a byte that is not UTF-8 at all."""
    body = 'data: {"content": "5 €"}\n\n'.encode()
    cut = body.index("€".encode()) + 1
    writer.write(HEADERS + chunk(body[:cut]))
    await writer.drain()
    await asyncio.sleep(0.05)
    writer.write(chunk(body[cut:]) + chunk(b"data: \xff\n\n") + b"0\r\n\r\n")
    await writer.drain()


async def cut_inside_a_character(reader, writer) -> None:
    """The body ends with the first byte of a 3-byte character."""
    writer.write(HEADERS + chunk(EVENT + "€".encode()[:1]) + b"0\r\n\r\n")
    await writer.drain()


@pytest.mark.parametrize(
    ("server", "text"),
    [
        (split_character, 'data: {"content": "5 €"}\n\ndata: \ufffd\n\n'),
        (cut_inside_a_character, EVENT.decode() + "\ufffd"),
    ],
    ids=["across chunks", "cut off at the end"],
)
@pytest.mark.parametrize("reader", ["aiter_text", "clients"])
@pytest.mark.parametrize("name", TRANSPORTS)
async def test_text_is_decoded_as_httpx_decodes_it(name, reader, server, text):
    async with raw_server(server) as url:
        body = b"".join(await read_body(url, TRANSPORTS[name](), READERS[reader])).decode()
    assert body == text


async def latin_1(reader, writer) -> None:
    head = HEADERS.replace(b"event-stream", b"event-stream; charset=iso-8859-1")
    writer.write(head + chunk('data: {"content": "5 £"}\n\n'.encode("latin-1")) + b"0\r\n\r\n")
    await writer.drain()


@pytest.mark.parametrize("name", TRANSPORTS)
async def test_a_declared_charset_is_decoded_by_httpx(name):
    async with raw_server(latin_1) as url:
        text = b"".join(await read_body(url, TRANSPORTS[name](), as_read)).decode()
    assert text == 'data: {"content": "5 £"}\n\n'


@pytest.mark.parametrize("name", TRANSPORTS)
async def test_the_body_of_another_charset_is_read_as_its_text(name):
    async with (
        raw_server(latin_1) as url,
        httpx.AsyncClient(transport=TRANSPORTS[name]()) as client,
        client.stream("POST", url, json={"message": "q"}) as response,
    ):
        parts = [part async for part in aiter_body(response)]
    assert all(isinstance(part, str) for part in parts)
    assert "".join(parts) == 'data: {"content": "5 £"}\n\n'


async def test_the_body_is_read_as_bytes_straight_from_aiohttp():
    async with (
        raw_server(answer_in_full) as url,
        httpx.AsyncClient(transport=http_transport()) as client,
        client.stream("POST", url, json={"message": "q"}) as response,
    ):
        assert b"".join([part async for part in aiter_body(response)]) == EVENT * 2
        assert not response.is_stream_consumed


async def test_text_of_a_plain_body_is_read_straight_from_aiohttp_too():
    """httpx's own iterators never run (each read through them cost ~6 µs of CPU per event)."""
    async with (
        raw_server(answer_in_full) as url,
        httpx.AsyncClient(transport=http_transport()) as client,
        client.stream("POST", url, json={"message": "q"}) as response,
    ):
        assert "".join([part async for part in aiter_text(response)]) == (EVENT * 2).decode()
        assert not response.is_stream_consumed


async def gzipped(reader, writer) -> None:
    body = gzip.compress(EVENT)
    head = HEADERS.replace(b"\r\n\r\n", b"\r\nContent-Encoding: gzip\r\n\r\n")
    writer.write(head + chunk(body) + b"0\r\n\r\n")
    await writer.drain()


@pytest.mark.parametrize("reader", ["aiter_text", "clients", "body"])
@pytest.mark.parametrize("name", TRANSPORTS)
async def test_a_compressed_body_is_decoded_by_httpx(name, reader):
    async with raw_server(gzipped) as url:
        assert b"".join(await read_body(url, TRANSPORTS[name](), READERS[reader])) == EVENT


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        (hang_up, httpx.RemoteProtocolError),
        (cut_mid_body, httpx.RemoteProtocolError),
        (stall_before_answering, httpx.ReadTimeout),
        (stall_mid_body, httpx.ReadTimeout),
        (stall_after_events, httpx.ReadTimeout),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("name", TRANSPORTS)
async def test_each_fault_raises_the_same_httpx_error(name, reader, fault, error):
    read_timeout = 0.2 if error is httpx.ReadTimeout else 0.5  # a stall is waited out
    async with raw_server(fault) as url:
        with pytest.raises(httpx.TransportError) as caught:
            await read_body(url, TRANSPORTS[name](), READERS[reader], read_timeout)
    assert type(caught.value) is error


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("name", TRANSPORTS)
async def test_a_reset_mid_body_is_a_dropped_connection(name, reader):
    # httpx says ReadError, or RemoteProtocolError when the reset lands after the last byte
    # read; either is "dropped" to the client (providers.attempts.transport_failure).
    async with raw_server(reset_mid_body) as url:
        with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
            await read_body(url, TRANSPORTS[name](), READERS[reader])


@pytest.mark.parametrize("name", TRANSPORTS)
async def test_nothing_listening_is_a_connect_error(name):
    with pytest.raises(httpx.TransportError) as caught:
        await read_body(f"http://127.0.0.1:{free_port()}/stream", TRANSPORTS[name]())
    assert type(caught.value) is httpx.ConnectError


@pytest.mark.parametrize("userinfo", ["analyst:s3cret@", ""])
@pytest.mark.parametrize("name", TRANSPORTS)
async def test_credentials_in_the_url_are_sent_as_one_basic_header(name, userinfo):
    heads: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await reader.readuntil(b"\r\n\r\n"))
        await answer_in_full(reader, writer)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    async with server:
        port = server.sockets[0].getsockname()[1]
        await read_body(f"http://{userinfo}127.0.0.1:{port}/stream", TRANSPORTS[name]())
    headers = [line.partition(":") for line in heads[0].decode().split("\r\n")[1:]]
    authorization = [value.strip() for key, _, value in headers if key.lower() == "authorization"]
    assert authorization == (["Basic YW5hbHlzdDpzM2NyZXQ="] if userinfo else [])  # analyst:s3cret


@pytest.fixture
def proxy_environment(monkeypatch):
    """Set proxy variables for one test: the transport reads them once per process."""
    for name in ("http_proxy", "https_proxy", "no_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    environment_proxies.cache_clear()
    yield monkeypatch.setenv
    environment_proxies.cache_clear()  # the next request reads the environment as it is again


async def test_http_proxy_from_the_environment_carries_the_request(proxy_environment):
    request_lines = []

    async def forward_proxy(reader, writer) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        request_lines.append(head.split(b"\r\n", 1)[0])
        writer.write(HEADERS + chunk(EVENT) + b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    proxy = await asyncio.start_server(forward_proxy, "127.0.0.1", 0)
    proxy_environment("HTTP_PROXY", f"http://127.0.0.1:{proxy.sockets[0].getsockname()[1]}")
    async with proxy:
        body = await read_body("http://agent.example/v1/stream", http_transport(), as_read)
    assert b"".join(body) == EVENT
    assert request_lines == [b"POST http://agent.example/v1/stream HTTP/1.1"]


async def test_no_proxy_hosts_are_reached_directly(proxy_environment):
    proxy_environment("HTTP_PROXY", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    proxy_environment("NO_PROXY", "127.0.0.1")
    async with raw_server(answer_in_full) as url:
        body = await read_body(url, http_transport(), as_read)
    assert b"".join(body) == EVENT * 2


# --- The loop's pool of connections -----------------------------------------------------------


class KeepAliveServer:
    """Answers request after request on each connection, as an agent's server does; counts the
    connections it was opened, and tells each request's handler its connection's number."""

    def __init__(self, answer: Callable[[asyncio.StreamWriter, int], Awaitable[bool]]) -> None:
        self.answer = answer  # returns False to stop serving that connection
        self.connections = 0
        self.closed_by_client: list[int] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    self.closed_by_client.append(number)
                    return
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                if not await self.answer(writer, number):
                    return
        finally:
            writer.close()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[str]:
        server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        async with server:
            try:
                yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/stream"
            finally:  # from Python 3.12.1 a server waits for its connections as it closes
                await close_http_sessions()


async def answer_whole(writer: asyncio.StreamWriter, number: int) -> bool:
    writer.write(HEADERS + chunk(EVENT) + b"0\r\n\r\n")
    await writer.drain()
    return True


async def test_turns_one_after_another_share_one_connection():
    """No connect (and no TLS handshake, against a real agent) for each turn."""
    server = KeepAliveServer(answer_whole)
    async with server.running() as url:
        bodies = [b"".join(await read_body(url, http_transport(), as_read)) for _ in range(3)]
    assert bodies == [EVENT] * 3
    assert server.connections == 1


async def test_a_body_left_unread_closes_its_connection():
    """A stopped turn's connection is mid-body: it is closed, never handed to the next turn."""
    released = asyncio.Event()

    async def first_unfinished(writer: asyncio.StreamWriter, number: int) -> bool:
        if number == 1:
            writer.write(HEADERS + chunk(EVENT))  # and never the end of the body
            await writer.drain()
            await released.wait()
            return True
        return await answer_whole(writer, number)

    server = KeepAliveServer(first_unfinished)
    timeout = httpx.Timeout(connect=2.0, read=2.0, write=2.0, pool=2.0)
    async with server.running() as url:
        async with (
            httpx.AsyncClient(timeout=timeout, transport=http_transport()) as client,
            client.stream("POST", url, json={"message": "q"}) as response,
        ):
            async for part in aiter_text(response):
                assert part.encode() == EVENT
                break  # the turn is stopped here
        released.set()
        assert b"".join(await read_body(url, http_transport(), as_read)) == EVENT
        await wait_until(lambda: server.closed_by_client)
        assert server.connections == 2
        assert server.closed_by_client == [1]  # the second stays in the pool


async def test_the_pool_does_not_cap_how_many_turns_stream_at_once():
    """aiohttp's pools allow 100 connections unless told otherwise; 120 turns stream here."""
    streams = 120
    all_open = asyncio.Event()

    async def wait_for_all(writer: asyncio.StreamWriter, number: int) -> bool:
        writer.write(HEADERS + chunk(EVENT))
        await writer.drain()
        if number == streams:
            all_open.set()
        await all_open.wait()
        writer.write(chunk(EVENT) + b"0\r\n\r\n")
        await writer.drain()
        return True

    server = KeepAliveServer(wait_for_all)
    async with server.running() as url, asyncio.timeout(20):
        bodies = await asyncio.gather(
            *(read_body(url, http_transport(), as_read, read_timeout=10) for _ in range(streams))
        )
    assert [b"".join(body) for body in bodies] == [EVENT * 2] * streams
    assert server.connections == streams


async def test_the_servers_shutdown_closes_the_pool():
    server = KeepAliveServer(answer_whole)
    async with server.running() as url:
        await read_body(url, http_transport(), as_read)
        await shut_down()
        await wait_until(lambda: server.closed_by_client)
        assert server.closed_by_client == [1]


async def test_a_turn_sent_on_a_connection_the_agent_is_closing_is_retried_on_a_new_one():
    """The pool's one hazard (docs/DEPLOY.md): the agent closes an idle connection just as a
    turn sends its request on it. The turn is retried on a new connection, and the page told."""
    from chats.agent.providers.bigdata import AgentStream
    from chats.agent.request import AgentRequest, AgentSettings
    from demo_agent.wire import sse_event

    answer = sse_event("c1", {"type": "ANSWER", "content": "part"})
    complete = sse_event("c1", {"type": "COMPLETE", "checkpoint_id": "k"})

    answered: set[int] = set()  # connections that have answered a request

    async def close_under_the_second_request(writer: asyncio.StreamWriter, number: int) -> bool:
        if number in answered:
            return False  # hangs up on the request instead of answering it
        answered.add(number)
        writer.write(HEADERS + chunk(answer) + chunk(complete) + b"0\r\n\r\n")
        await writer.drain()
        return True

    server = KeepAliveServer(close_under_the_second_request)
    notices: list[str] = []

    async def on_retry(message: str, delay: float) -> None:
        notices.append(message)

    async with server.running() as url:
        settings = AgentSettings(url=url, max_retries=1, backoff_base=0.01)
        turns = []
        for _ in range(2):
            stream = AgentStream(AgentRequest(message="q"), settings, on_retry=on_retry)
            turns.append([event.type async for event in stream.events()])
    assert turns == [["ANSWER", "COMPLETE"], ["ANSWER", "COMPLETE"]]
    assert server.connections == 2  # the second turn's retry opened a new one
    assert notices == ["The connection to the research agent dropped before it answered."]


# --- Paced streams are read once per tick (chats.loop.ticks) ------------------------------------


def numbered(n: int) -> bytes:
    return b'data: {"type": "ANSWER", "content": "w%d "}\n\n' % n


BURST = None  # a gap meaning: all of this part's events in one write


def sends(*parts: tuple[int, float | None]) -> Handler:
    """An agent that sends, for each (count, gap), `count` events numbered in order: each in a
    write of its own `gap` seconds apart (0: as fast as the reader takes them), or, with the gap
    BURST, all in one write (as when a tool returns a long result)."""

    async def send(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(HEADERS)
        n = 0
        for count, gap in parts:
            if gap is BURST:
                writer.write(chunk(b"".join(numbered(i) for i in range(n, n + count))))
                n += count
                continue
            for _ in range(count):
                writer.write(chunk(numbered(n)))
                n += 1
                await writer.drain()
                await asyncio.sleep(gap)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    return send


class CountedTicks:
    """The relay's ticks (chats.loop.ticks.Ticks), counting the reads that waited for one."""

    def __init__(self, interval: float) -> None:
        self.ticks = Ticks(interval)
        self.waits = 0
        self.readers: set[asyncio.Task] = set()  # the readers that have waited for a tick
        self.two_readers_paced = asyncio.Event()

    async def wait(self, before=None) -> None:
        self.waits += 1
        self.readers.add(asyncio.current_task())
        if len(self.readers) >= 2:
            self.two_readers_paced.set()
        await self.ticks.wait(before)


@asynccontextmanager
async def ticked_transport(interval: float) -> AsyncIterator[tuple[AiohttpTransport, CountedTicks]]:
    ticks = CountedTicks(interval)
    session = new_session(ssl_context())
    try:
        yield AiohttpTransport(session, tick=ticks.wait), ticks
    finally:
        await session.close()


async def test_a_paced_stream_is_read_once_per_tick(settings):
    """An agent that sends an event every 10 ms is read every 100 ms: a read takes ten."""
    settings.EVENT_FLUSH_INTERVAL = 0.1  # the site's transport reads at the relay's ticks
    async with raw_server(sends((30, 0.01))) as url:
        reads = await read_body(url, http_transport(), as_read)
    await close_http_sessions()
    assert b"".join(reads) == b"".join(numbered(n) for n in range(30))
    assert len(reads) <= 10  # 30 when each event is read as it comes; about 4 here


@pytest.fixture
def socket_reads(monkeypatch) -> list[int]:
    """Counts the bytes-bearing reads of the connections' sockets (aiohttp's data_received)."""
    count = [0]
    received = _ConnectionProtocol.data_received

    def counted(self, data: bytes) -> None:
        count[0] += bool(data)
        received(self, data)

    monkeypatch.setattr(_ConnectionProtocol, "data_received", counted)
    return count


async def test_a_paced_streams_socket_is_read_once_per_tick(settings, socket_reads):
    """Between two ticks its socket is held, and the kernel gathers the agent's packets: one
    read of the socket takes what ten packets brought, not one read a packet."""
    settings.EVENT_FLUSH_INTERVAL = 0.1
    async with raw_server(sends((30, 0.01))) as url:
        reads = await read_body(url, http_transport(), as_read)
    await close_http_sessions()
    assert b"".join(reads) == b"".join(numbered(n) for n in range(30))
    assert socket_reads[0] <= 12  # 31 or more without the hold (the head, each event); ~6 here


def close_delimited(events: int, gap: float) -> Handler:
    """An agent that paces `events` events, then ends its body by closing the connection (no
    length, no chunks: HTTP/1.0's way, and any agent's that crashes mid-stream)."""

    async def send(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
        writer.write(b"Connection: close\r\n\r\n")
        for n in range(events):
            if n:
                await asyncio.sleep(gap)
            writer.write(numbered(n))
            await writer.drain()
        writer.transport.abort()  # at once, with no TLS goodbye: as a process that exits

    return send


@pytest.mark.parametrize("loop_factory", [uvloop.new_event_loop, asyncio.new_event_loop])
def test_a_paced_stream_over_tls_that_ends_with_the_connection_is_read_whole(loop_factory):
    """Over TLS the socket is not held: uvloop's TLS layer, paused, drops what it holds when
    the agent closes the connection, and a body the close delimits would end short, silently."""
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_context)
    client_context = ssl.create_default_context()
    authority.configure_trust(client_context)

    async def read() -> list[bytes]:
        session = new_session(client_context)
        try:
            async with raw_server(close_delimited(21, 0.01), server_context) as url:
                transport = AiohttpTransport(session, tick=Ticks(0.05).wait)
                return await read_body(url, transport, as_read)
        finally:
            await session.close()

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        reads = runner.run(read())
    assert b"".join(reads) == b"".join(numbered(n) for n in range(21))


class RecordingTransport(asyncio.Transport):
    """What a connection's protocol asks of its socket: reading, or not."""

    def __init__(self) -> None:
        super().__init__()
        self.reading = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return False


@pytest.mark.parametrize("released_first", ["hold", "flow control"])
async def test_the_hold_and_aiohttps_flow_control_each_keep_the_socket_until_both_let_go(
    released_first,
):
    """A reader far behind (aiohttp pauses for its buffer) and the hold between two ticks both
    stop reading; the socket is read again only when neither holds it, whichever lets go first."""
    protocol = _ConnectionProtocol(loop=asyncio.get_running_loop())
    transport = RecordingTransport()
    protocol.connection_made(transport)
    protocol.hold_reading()
    protocol._pause_reading_for_buffer()  # aiohttp's own: its buffer is full
    assert not transport.reading
    if released_first == "hold":
        protocol.release_reading()
        assert not transport.reading
        protocol._resume_reading_for_buffer()
    else:
        protocol._resume_reading_for_buffer()
        assert not transport.reading
        protocol.release_reading()
    assert transport.reading


async def test_an_agent_sending_flat_out_is_read_as_fast_as_it_sends(monkeypatch):
    """Its reads find the next event waiting, or wait microseconds for it: no tick is waited
    for, so a fast stream is not slowed to one read a tick."""
    # A stall of the machine of 5 ms would pace it, as it may in a server. Here it takes one of
    # a quarter of a second: a busy CI machine can stall for the 50 ms this once took.
    monkeypatch.setattr(aiohttp_transport, "PACED_WAIT", 0.25)
    async with ticked_transport(0.1) as (transport, ticks), raw_server(sends((500, 0))) as url:
        reads = await read_body(url, transport, as_read)
    assert b"".join(reads) == b"".join(numbered(n) for n in range(500))
    assert ticks.waits == 0


async def test_a_burst_ends_the_pace_until_the_agent_slows_again(monkeypatch):
    """Paced, then a burst, then events a millisecond apart: after the burst each event is read
    as it comes, not once per tick (that would be three or four reads). The burst itself is
    read at a tick, with up to 100 ms of the tail; ~200 tail events are left after it."""
    monkeypatch.setattr(aiohttp_transport, "PACED_WAIT", 0.015)  # not paced by a short stall
    async with (
        ticked_transport(0.1) as (transport, ticks),
        raw_server(sends((5, 0.03), (400, BURST), (300, 0.001))) as url,
    ):
        reads = await read_body(url, transport, as_bytes)
    assert b"".join(reads) == b"".join(numbered(n) for n in range(705))
    assert ticks.waits >= 1  # the paced start waited for ticks
    last_of_burst = next(i for i, read in enumerate(reads) if numbered(404) in read)
    assert len(reads) - last_of_burst > 20


async def test_a_turn_stopped_while_it_waits_for_a_tick_stops_alone():
    """Stopping a turn cancels its reader, most likely while it waits for a tick: the other
    turn reading at the same ticks reads on to its end, and the next turn reads whole on the
    other's connection."""

    async def paced(writer: asyncio.StreamWriter, number: int) -> bool:
        try:
            await sends((20, 0.01))(None, writer)
        except ConnectionError:  # the stopped turn's connection
            return False
        return True

    server = KeepAliveServer(paced)
    async with ticked_transport(0.05) as (transport, ticks), server.running() as url:
        stopped = asyncio.create_task(read_body(url, transport, as_read))
        other = asyncio.create_task(read_body(url, transport, as_read))
        await asyncio.wait_for(ticks.two_readers_paced.wait(), 5)
        stopped.cancel()
        body = b"".join(await asyncio.wait_for(other, 5))
        after = b"".join(await read_body(url, transport, as_read))
    assert stopped.cancelled()
    expected = b"".join(numbered(n) for n in range(20))
    assert body == after == expected
    assert server.connections == 2  # the last turn took the other's connection


@pytest.mark.parametrize("reader", READERS)
async def test_an_agent_that_trickles_within_the_read_timeout_is_read_whole(reader):
    """The read timeout is the longest wait for the next bytes, not for the whole body: events
    0.1 s apart for 1.2 s, under a read timeout of 0.6 s, arrive whole."""
    async with raw_server(sends((12, 0.1))) as url:
        reads = await read_body(url, http_transport(), READERS[reader], read_timeout=0.6)
    await close_http_sessions()
    assert b"".join(reads) == b"".join(numbered(n) for n in range(12))


async def test_a_paced_body_moves_no_timer_per_packet(monkeypatch):
    """aiohttp's own read timeout moves a timer for every packet it receives (~3.5 µs each, and
    a paced agent sends each event in a packet of its own); the body's deadline looks once per
    read timeout instead."""
    timers = 0  # the client's read timers (the stand-in's sleeps are timers too, on this loop)
    timer_handle_init = asyncio.TimerHandle.__init__

    def counted(self, when, callback, *args, **kwargs):
        nonlocal timers
        timers += callback.__name__ in {"_on_read_timeout", "_check"}
        timer_handle_init(self, when, callback, *args, **kwargs)

    async with raw_server(sends((40, 0.005))) as url:
        monkeypatch.setattr(asyncio.TimerHandle, "__init__", counted)
        reads = await read_body(url, http_transport(), as_read, read_timeout=5.0)
        monkeypatch.undo()
    await close_http_sessions()
    assert b"".join(reads) == b"".join(numbered(n) for n in range(40))
    assert 1 <= timers < 5  # one a packet (40) with aiohttp's


@pytest.fixture
def resumes(monkeypatch) -> list[int]:
    """Counts the times a connection's protocol really resumes reading (aiohttp's own code)."""
    count = [0]
    resume = BaseProtocol.resume_reading

    def counted(self, *args, **kwargs):
        count[0] += 1
        resume(self, *args, **kwargs)

    monkeypatch.setattr(BaseProtocol, "resume_reading", counted)
    return count


async def test_a_paced_read_resumes_nothing_that_is_not_paused(resumes):
    """aiohttp's reader asks for a resume with every chunk it takes; with nothing paused, that
    is a call into the parser and the transport for every event of a paced stream."""
    async with raw_server(sends((40, 0.005))) as url:
        reads = await read_body(url, http_transport(), as_read)
    await close_http_sessions()
    assert b"".join(reads) == b"".join(numbered(n) for n in range(40))
    assert resumes[0] == 0  # 40 or more, one a chunk, with aiohttp's own


async def send_four_megabytes(reader, writer) -> None:
    writer.write(HEADERS)
    writer.write(chunk(b"x" * 65535 + b"\n") * 64)
    writer.write(b"0\r\n\r\n")
    await writer.drain()


async def test_a_reader_that_falls_behind_pauses_the_connection_and_resumes_it(
    resumes, monkeypatch
):
    """Flow control still works: bytes past aiohttp's buffer limit pause the connection while
    the reader is away, and reading resumes it, to the body's end. Away for longer than the
    read timeout, too: the agent is not silent, the reader is behind."""

    paused = asyncio.Event()
    pause = BaseProtocol.pause_reading

    def noted(self, *args, **kwargs):
        paused.set()
        pause(self, *args, **kwargs)

    monkeypatch.setattr(BaseProtocol, "pause_reading", noted)

    async def slow(response: httpx.Response) -> list[bytes]:
        parts = []
        async for part in aiter_text(response):
            if not parts:
                await paused.wait()  # the agent filled the buffer
                await asyncio.sleep(0.2)  # and the reader stays away past the read timeout
            parts.append(part.encode())
        return parts

    async with raw_server(send_four_megabytes) as url:
        reading = read_body(url, http_transport(), slow, read_timeout=0.15)
        reads = await asyncio.wait_for(reading, 10)
    await close_http_sessions()
    assert b"".join(reads) == (b"x" * 65535 + b"\n") * 64
    assert resumes[0] >= 1
