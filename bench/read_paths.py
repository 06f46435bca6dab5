"""What reading the agents' streams costs, by read path, against its floor.

    .venv/bin/python bench/read_paths.py [--streams 200] [--rounds 3]

The stand-in agent (`bench._site.Upstream`) paces each stream at 50 events/s for 150 events, as
bench/streaming.py's load does, so nearly every socket read carries one event. Three ways of
reading the same streams run in this one process, alternately, round after round:

- site: the site's path without the parsing (`httpx.AsyncClient` over `http_transport()`, the
  loop's connection pool, `client.stream`, `aiter_text(response)`), which reads a paced
  stream once per tick of the relay (chats.loop.ticks): 1.25-1.5 events a read;
- aiohttp: aiohttp directly (`ClientSession.post`, `content.readany()`), which the site's
  transport wraps;
- protocol: a bare `asyncio.Protocol` on a socket that writes the request and counts the blank
  lines in what arrives: no HTTP parsing, no stream object, no task woken per read. The floor
  of any reader on this event loop: the kernel's and uvloop's share of a read.

Each figure is this process's CPU time over a round divided by the events read (µs/event), with
its ratio to the protocol floor in the same round. No goal is judged here: the numbers say how
much of bench/streaming.py's "server CPU µs/event" a different HTTP reader could win at most
(docs/PERFORMANCE.md, "Measured and not kept"). The site's path reads once per tick and the
other two once per packet, so its figure also carries the ticks' own cost, which in the server
buys fewer wake-ups of the parsing and the run (not measured here: docs/PERFORMANCE.md, "A paced
stream is read once per tick").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine
from _site import Upstream, question, setup_django

EVENTS = 150
RATE = 50.0


async def read_site(url: str, text: str) -> int:
    """One stream read as the site reads it, without the parsing: bench/stages.py's read."""
    from stages import read_stream

    counts = [0]
    await read_stream(url, text, counts, 0, lambda index: None)
    return counts[0]


async def read_aiohttp(url: str, text: str, session) -> int:
    import aiohttp

    from chats.agent.providers.bigdata import request_body
    from chats.agent.request import AgentRequest

    events = 0
    timeout = aiohttp.ClientTimeout(total=None, sock_read=120)
    async with session.post(
        url, json=request_body(AgentRequest(message=text)), timeout=timeout
    ) as r:
        while chunk := await r.content.readany():
            events += chunk.count(b"\n\n")
    return events


class Counting(asyncio.Protocol):
    """Counts blank lines as they arrive; the stand-in ends each event with one."""

    def __init__(self, done: asyncio.Future) -> None:
        self.done = done
        self.events = 0
        self._tail = b""

    def data_received(self, data: bytes) -> None:
        data = self._tail + data  # a blank line may straddle two reads
        self.events += data.count(b"\n\n")
        self._tail = data[-1:]
        if b"\r\n0\r\n\r\n" in data:  # the chunked body's end: hang up, as a reader would
            self.transport.close()

    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(self.events)


async def read_protocol(url: str, text: str) -> int:
    from urllib.parse import urlsplit

    from chats.agent.providers.bigdata import request_body
    from chats.agent.request import AgentRequest

    loop = asyncio.get_running_loop()
    parts = urlsplit(url)
    body = json.dumps(request_body(AgentRequest(message=text))).encode()
    head = (
        f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    done = loop.create_future()
    transport, _ = await loop.create_connection(lambda: Counting(done), parts.hostname, parts.port)
    transport.write(head + body)
    return await done


async def one_round(url: str, path: str, streams: int) -> float:
    import aiohttp

    text = question(events=EVENTS, rate=RATE)
    session = aiohttp.ClientSession() if path == "aiohttp" else None
    started = time.process_time()
    if path == "site":
        counts = await asyncio.gather(*(read_site(url, text) for _ in range(streams)))
    elif path == "aiohttp":
        counts = await asyncio.gather(*(read_aiohttp(url, text, session) for _ in range(streams)))
    else:
        counts = await asyncio.gather(*(read_protocol(url, text) for _ in range(streams)))
    cpu = time.process_time() - started
    if session is not None:
        await session.close()
    total = sum(counts)
    # The protocol counts blank lines in raw chunked bytes, where a chunk's framing can split
    # one from its event: allow it a few in a thousand.
    assert total >= 0.995 * streams * EVENTS, (path, total)
    return cpu / total * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("SECRET_KEY", "bench-read-paths-not-secret")
    import uvloop

    setup_django()
    from chats.agent import close_http_sessions

    print(f"## Reading {args.streams} paced streams, by read path (`bench/read_paths.py`)\n")
    print(machine())
    print(f"\n{args.streams} streams x {EVENTS} events at {RATE:g}/s; {args.rounds} rounds.\n")
    paths = ["site", "aiohttp", "protocol"]
    figures: dict[str, list[float]] = {path: [] for path in paths}
    ratios: dict[str, list[float]] = {path: [] for path in paths}
    with Upstream() as upstream, asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(one_round(upstream.url, "site", 20))  # warm-up: imports, first connections
        for _ in range(args.rounds):
            this_round = {p: runner.run(one_round(upstream.url, p, args.streams)) for p in paths}
            for path in paths:
                figures[path].append(this_round[path])
                ratios[path].append(this_round[path] / this_round["protocol"])
        runner.run(close_http_sessions())
    print("| read path | CPU µs/event, each round | median | x the protocol floor (median) |")
    print("|---|---|---:|---:|")
    for path in paths:
        rounds = " / ".join(f"{v:.1f}" for v in figures[path])
        median, ratio = statistics.median(figures[path]), statistics.median(ratios[path])
        print(f"| {path} | {rounds} | {median:.1f} | {ratio:.2f} |")
    site, floor = statistics.median(figures["site"]), statistics.median(figures["protocol"])
    print(
        f"\nAt most {site - floor:.1f} µs of CPU per event separate the site's read from the"
        " floor; an HTTP reader of its own would win part of that (no goal is judged here)."
    )


if __name__ == "__main__":
    main()
