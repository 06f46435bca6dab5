"""Serve the same site with uvicorn and with daphne, and compare them on the streaming path.

    .venv/bin/python bench/asgi_servers.py [--rounds N]

Each round starts each server in turn (the order alternates between rounds) on a fresh SQLite
database, against the same scripted stand-in agent (bench/_site.py), and measures:

a. one 5,000-event run over the websocket, ask → turn.finished (median of 3);
b. 50 concurrent chats, one turn each, 150 events at 50 events/s per turn: events/s delivered
   and the p99 latency the site adds (stand-in send time → client receive time);
c. 2,000 GETs of /login/, 20 at a time, with one httpx AsyncClient.

The table shows the median over rounds and the ratio uvicorn/daphne. daphne has no ASGI lifespan
(start-up recovery of orphaned turns does not run), which changes nothing measured here. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _site as bench

SERVERS = ("uvicorn", "daphne")


async def page_throughput(site: bench.Site, *, requests: int, concurrency: int) -> dict:
    import httpx

    url = f"{site.origin}/login/"
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(requests):
        queue.put_nowait(i)
    failures = 0
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal failures
        while not queue.empty():
            queue.get_nowait()
            response = await client.get(url)
            if response.status_code != 200 or b"csrfmiddlewaretoken" not in response.content:
                failures += 1

    async with httpx.AsyncClient(trust_env=False, limits=limits, timeout=30) as client:
        await client.get(url)  # warm
        cpu = (bench.self_cpu_seconds(), site.cpu_seconds())
        started = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return {
        "rps": requests / elapsed,
        "failures": failures,
        "client_cpu": (bench.self_cpu_seconds() - cpu[0]) / elapsed,
        "server_cpu": (site.cpu_seconds() - cpu[1]) / elapsed,
    }


async def measure(server: str, upstream: bench.Upstream, args) -> dict:
    database = bench.Database("sqlite")
    try:
        with bench.Site(server, upstream.url, database, chats=args.chats + 10) as site:
            print(f"  {server}: {site.command_line()}", flush=True)
            await bench.one_long_turn(site, 500)  # warm-up
            long_runs = [await bench.one_long_turn(site, args.events) for _ in range(3)]
            ok = all(r.status == "complete" and r.events == args.events for r in long_runs)
            concurrent = await bench.concurrent_turns(
                site, upstream, chats=args.chats, events=args.turn_events, rate=args.rate
            )
            await asyncio.sleep(1)
            pages = await page_throughput(site, requests=args.requests, concurrency=20)
            return {
                "long_ms": bench.median([r.elapsed for r in long_runs]) * 1000,
                "long_ok": ok,
                "compression": long_runs[0].compression,
                "ev_s": concurrent.events_per_second,
                "p50_ms": concurrent.p50_ms,
                "p99_ms": concurrent.p99_ms,
                "conc_ok": concurrent.seqs_ok and set(concurrent.statuses) == {"complete"},
                "conc_server_cpu": concurrent.server_cpu_share,
                "rps": pages["rps"],
                "page_failures": pages["failures"],
                "page_server_cpu": pages["server_cpu"],
                "page_client_cpu": pages["client_cpu"],
                "rss_mib": site.rss_kib() / 1024,
            }
    finally:
        database.drop()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds (each runs both servers)")
    parser.add_argument("--events", type=int, default=5000, help="events in the long stream")
    parser.add_argument("--chats", type=int, default=50, help="concurrent chats")
    parser.add_argument("--turn-events", type=int, default=150, help="events per paced turn")
    parser.add_argument("--rate", type=float, default=50.0, help="events/s of each paced turn")
    parser.add_argument("--requests", type=int, default=2000, help="GETs of /login/")
    return parser.parse_args()


async def main(loop_name: str) -> None:
    args = parse_args()
    print("# ASGI servers: uvicorn vs daphne\n")
    print(f"Machine: {bench.machine()}")
    print(f"Command: {bench.invocation()}")
    print(f"Clients: one process, {loop_name} event loop, `websockets` + httpx\n")
    started = time.monotonic()
    results: dict[str, list[dict]] = {server: [] for server in SERVERS}
    with bench.Upstream() as upstream:
        for round_ in range(args.rounds):
            order = SERVERS if round_ % 2 == 0 else SERVERS[::-1]
            print(f"Round {round_ + 1}:")
            for server in order:
                results[server].append(await measure(server, upstream, args))

    def med(server: str, key: str) -> float:
        return bench.median([r[key] for r in results[server]])

    rows = []
    metrics = [
        (f"a. {args.events:,}-event stream, ask → finished (ms)", "long_ms", "{:.0f}", "lower"),
        (f"b. {args.chats} chats: delivered events/s", "ev_s", "{:,.0f}", "higher"),
        (f"b. {args.chats} chats: added latency p50 (ms)", "p50_ms", "{:.1f}", "lower"),
        (f"b. {args.chats} chats: added latency p99 (ms)", "p99_ms", "{:.1f}", "lower"),
        ("b. server CPU during the chats (of one core)", "conc_server_cpu", "{:.0%}", "lower"),
        (f"c. {args.requests:,} GETs of /login/, 20 at a time (req/s)", "rps", "{:,.0f}", "higher"),
        ("c. server CPU during the GETs (of one core)", "page_server_cpu", "{:.0%}", "lower"),
        ("server RSS at the end (MiB)", "rss_mib", "{:.0f}", "lower"),
    ]
    for label, key, fmt, better in metrics:
        u, d = med("uvicorn", key), med("daphne", key)
        rows.append([label, fmt.format(u), fmt.format(d), f"{u / d:.2f}", better])
    print()
    print(bench.table(["measure", "uvicorn", "daphne", "uvicorn/daphne", "better"], rows))
    checks = []
    for server in SERVERS:
        for r in results[server]:
            if not (r["long_ok"] and r["conc_ok"]) or r["page_failures"]:
                checks.append(f"{server}: some turns or pages failed: {r}")
    print(
        f"\nMedians over {args.rounds} round(s). Websocket compression negotiated: "
        + ", ".join(f"{s} {results[s][0]['compression']}" for s in SERVERS)
        + f". Client CPU during the GETs: uvicorn {med('uvicorn', 'page_client_cpu'):.0%}, "
        f"daphne {med('daphne', 'page_client_cpu'):.0%} of one core."
    )
    print("\n".join(checks) or "Every turn completed with all its events in order; every GET 200.")
    print(f"\nTotal time: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    asyncio.run(main(bench.install_uvloop()))
