"""Time the streaming path end to end: stand-in agent → real site → websocket clients.

    .venv/bin/python bench/streaming.py [--repeat N] [--skip-services]

The site runs under uvicorn in its own process on a fresh SQLite database with the in-memory
channel layer; the scripted stand-in agent (demo_agent.scripted, via bench/_site.py) in another;
every websocket client in this one, on one uvloop event loop. Three measurements:

1. One 5,000-event run over the site's websocket (ask → turn.finished) against reading and
   parsing the same stream straight from the stand-in with `chats.agent.sse.aiter_events`.
   Goal: site ≤ 1.5x the direct read.
2. 1, 50 and 200 concurrent chats, one turn each, every upstream paced at 50 events/s: events/s
   delivered, and the latency the site adds (stand-in send time → client receive time, per
   ANSWER). Goal: p99 under 100 ms at 200 chats.
3. Server memory per concurrent streaming turn, on a fresh server: (RSS during - RSS idle) / N.

With PostgreSQL and Redis on their default loopback ports, the 200-chat case runs once more on
them (`--skip-services` to skip). Every figure is printed; nothing passes or fails. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _site as bench


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs of the 5,000-event stream")
    parser.add_argument("--events", type=int, default=5000, help="events in the long stream")
    parser.add_argument("--concurrency", default="1,50,200", help="concurrent chats to try")
    parser.add_argument("--turn-events", type=int, default=150, help="events per paced turn")
    parser.add_argument("--rate", type=float, default=50.0, help="events/s of each paced turn")
    parser.add_argument("--memory-chats", type=int, default=200, help="turns for the RSS figure")
    parser.add_argument("--skip-services", action="store_true", help="skip PostgreSQL + Redis")
    parser.add_argument("--parts", default="1,2,3,2c,2b", help="which measurements to run")
    return parser.parse_args()


async def long_stream(site: bench.Site, upstream: bench.Upstream, args) -> None:
    print(f"\n## 1. One {args.events:,}-event stream: site websocket vs direct read\n")
    rows = []
    site_times, direct_times = [], []
    for run in range(1, args.repeat + 1):
        # Alternate the order so that neither side always runs on a warmer machine.
        if run % 2:
            direct, count = await bench.read_directly(upstream.url, args.events)
            turn = await bench.one_long_turn(site, args.events)
        else:
            turn = await bench.one_long_turn(site, args.events)
            direct, count = await bench.read_directly(upstream.url, args.events)
        ok = turn.events == count == args.events and turn.seqs_ok and turn.status == "complete"
        site_times.append(turn.elapsed)
        direct_times.append(direct)
        rows.append(
            [
                run,
                f"{turn.elapsed * 1000:.0f}",
                f"{direct * 1000:.0f}",
                f"{turn.elapsed / direct:.2f}",
                "yes" if ok else f"NO ({turn.events}/{count}, {turn.status})",
            ]
        )
    site_median, direct_median = bench.median(site_times), bench.median(direct_times)
    rows.append(
        [
            "median",
            f"{site_median * 1000:.0f}",
            f"{direct_median * 1000:.0f}",
            f"{site_median / direct_median:.2f}",
            "",
        ]
    )
    print(
        bench.table(
            ["run", "site ws (ms)", "direct httpx+parse (ms)", "ratio", "all events, in order"],
            rows,
        )
    )
    print(
        f"\nGoal ratio ≤ 1.5: {'met' if site_median / direct_median <= 1.5 else 'MISSED'} "
        f"(median ratio {site_median / direct_median:.2f}; websocket compression: "
        f"{turn.compression}; site throughput {args.events / site_median:,.0f} events/s)"
    )


def concurrency_row(result: bench.ConcurrentResult, label: str = "") -> list[str]:
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(result.statuses.items()))
    return [
        label or str(result.chats),
        f"{result.events:,}",
        f"{result.offered_per_second:,.0f}",
        f"{result.events_per_second:,.0f}",
        f"{result.p50_ms:.1f}",
        f"{result.p99_ms:.1f}",
        f"{result.p99_steady_ms:.1f}",
        f"{result.max_ms:.0f}",
        f"{result.first_event_p50_ms:.0f} / {result.first_event_max_ms:.0f}",
        f"{result.server_cpu_share:.0%}",
        f"{result.client_cpu_share:.0%}",
        f"{result.upstream_cpu_share:.0%}",
        statuses + ("" if result.seqs_ok else "; EVENTS MISSING"),
    ]


CONCURRENCY_HEADERS = [
    "chats",
    "events",
    "offered ev/s",
    "delivered ev/s",
    "added p50 (ms)",
    "added p99 (ms)",
    "p99 after 1 s (ms)",
    "max (ms)",
    "ask → 1st event p50 / max (ms)",
    "server CPU",
    "client CPU",
    "stand-in CPU",
    "outcome",
]


async def concurrency(site: bench.Site, upstream: bench.Upstream, args) -> None:
    print(
        f"\n## 2. Concurrent chats, one turn each, {args.turn_events} events at "
        f"{args.rate:g} events/s per turn\n"
    )
    rows = []
    goal = None
    for chats in [int(n) for n in args.concurrency.split(",")]:
        result = await bench.concurrent_turns(
            site, upstream, chats=chats, events=args.turn_events, rate=args.rate
        )
        rows.append(concurrency_row(result))
        if chats == 200:
            goal = result.p99_ms
        await asyncio.sleep(1)  # let the finished turns' writes settle
    print(bench.table(CONCURRENCY_HEADERS, rows))
    print(
        "\nCPU columns are shares of one core over the run (2 cores in all). Added latency is "
        "stand-in send time → client receive time, per ANSWER event."
    )
    if goal is not None:
        print(
            f"Goal p99 < 100 ms at 200 chats: {'met' if goal < 100 else 'MISSED'} ({goal:.0f} ms)"
        )


async def memory(site: bench.Site, upstream: bench.Upstream, args) -> None:
    n = args.memory_chats
    print(f"\n## 3. Server memory per concurrent streaming turn ({n} turns, fresh server)\n")
    await bench.one_long_turn(site, 200)  # warm: imports, templates, connections
    await bench.concurrent_turns(site, upstream, chats=2, events=20, rate=100)
    await asyncio.sleep(1)
    idle = bench.median([site.rss_kib() for _ in range(5)])
    samples: list[int] = []
    result = await bench.concurrent_turns(
        site, upstream, chats=n, events=args.turn_events, rate=args.rate, rss_samples=samples
    )
    peak = max(samples)
    mid = sorted(samples)[len(samples) // 2]
    print(
        bench.table(
            ["RSS idle (MiB)", "RSS peak (MiB)", "RSS median (MiB)", "turns", "per turn (KiB)"],
            [
                [
                    f"{idle / 1024:.1f}",
                    f"{peak / 1024:.1f}",
                    f"{mid / 1024:.1f}",
                    n,
                    f"{(peak - idle) / n:.0f}",
                ]
            ],
        )
    )
    print(
        f"\nPer turn = (peak - idle) / {n}; it includes the websocket, the upstream HTTP "
        f"connection, the run's task and pending events. ({result.events:,} events delivered, "
        f"p99 {result.p99_ms:.0f} ms)"
    )


async def services(upstream: bench.Upstream, args) -> None:
    print("\n## 2b. 200 chats on PostgreSQL + the Redis channel layer (uvicorn, one process)\n")
    database = bench.Database("postgres")
    try:
        extra = {"REDIS_URL": "redis://127.0.0.1:6379/15"}
        with bench.Site("uvicorn", upstream.url, database, chats=260, extra_env=extra) as site:
            print(f"    {site.command_line()}\n")
            await bench.one_long_turn(site, 200)
            rows = []
            for chats in (50, 200):
                result = await bench.concurrent_turns(
                    site, upstream, chats=chats, events=args.turn_events, rate=args.rate
                )
                rows.append(concurrency_row(result))
                await asyncio.sleep(1)
            print(bench.table(CONCURRENCY_HEADERS, rows))
            print(
                "\n'NO turn.finished': every event arrived but the final frame never did "
                f"(waited {bench.FINISH_GRACE:g} s after the last event; docs/PERFORMANCE.md)."
            )
    finally:
        database.drop()


async def persistent_connections(upstream: bench.Upstream, args) -> None:
    print(
        "\n## 2c. 200 chats with persistent database connections "
        "(DATABASE_URL=...?conn_max_age=600)\n"
    )
    database = bench.Database("sqlite")
    database.url += "?conn_max_age=600"  # django-environ reads CONN_MAX_AGE from the URL
    try:
        with bench.Site("uvicorn", upstream.url, database, chats=210) as site:
            print(f"    {site.command_line()}\n")
            await bench.one_long_turn(site, 500)
            rows = []
            turn = await bench.one_long_turn(site, args.events)
            result = await bench.concurrent_turns(
                site, upstream, chats=200, events=args.turn_events, rate=args.rate
            )
            rows.append(concurrency_row(result))
            print(bench.table(CONCURRENCY_HEADERS, rows))
            print(f"\n{args.events:,}-event stream on this server: {turn.elapsed * 1000:.0f} ms")
    finally:
        database.drop()


async def main(loop_name: str) -> None:
    args = parse_args()
    parts = set(args.parts.split(","))
    print("# Streaming benchmark\n")
    print(f"Machine: {bench.machine()}")
    print(f"Command: {bench.invocation()}")
    print(f"Clients: one process, {loop_name} event loop, `websockets` + httpx")
    started = time.monotonic()
    concurrency_total = sum(int(n) for n in args.concurrency.split(","))
    with bench.Upstream() as upstream:
        if parts & {"1", "2"}:
            database = bench.Database("sqlite")
            try:
                chats = args.repeat + concurrency_total + 5
                with bench.Site("uvicorn", upstream.url, database, chats=chats) as site:
                    print(f"Site:    {site.command_line()}")
                    await bench.one_long_turn(site, 500)  # warm-up, not measured
                    if "1" in parts:
                        await long_stream(site, upstream, args)
                    if "2" in parts:
                        await concurrency(site, upstream, args)
            finally:
                database.drop()
        if "3" in parts:
            database = bench.Database("sqlite")
            try:
                chats = args.memory_chats + 5
                with bench.Site("uvicorn", upstream.url, database, chats=chats) as site:
                    await memory(site, upstream, args)
            finally:
                database.drop()
        if "2c" in parts:
            await persistent_connections(upstream, args)
        if "2b" not in parts:
            pass
        elif args.skip_services:
            print("\n(PostgreSQL + Redis run skipped: --skip-services)")
        elif not bench.services_available():
            print("\n(PostgreSQL + Redis run skipped: not reachable on 127.0.0.1:5432 / :6379)")
        else:
            await services(upstream, args)
    print(f"\nTotal time: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    asyncio.run(main(bench.install_uvloop()))
