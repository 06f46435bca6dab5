"""Time the streaming path end to end: stand-in agent → real site → websocket clients.

    .venv/bin/python bench/streaming.py [--parts 1,2,3,2b] [--workers 1,2,4] [--skip-services]
                                        [--tls] [--timeline]

The site runs as in production (`python -m researchsite.serve`, uvicorn) in its own process on a
fresh database; the scripted stand-in agent (demo_agent.scripted, via bench/_site.py) in another;
every websocket client in this one, on one uvloop event loop. The parts:

1. One 5,000-event run over the site's websocket (ask → turn.finished) against reading and
   parsing the same stream straight from the stand-in with `chats.agent.sse.aiter_events`
   (SQLite, in-memory channel layer, 1 worker).
2. 1, 50 and 200 concurrent chats, one turn each, every upstream paced at 50 events/s for 150
   events (SQLite, in-memory channel layer, 1 worker): events/s delivered, the latency the site
   adds (stand-in send time → client receive time, per ANSWER), ask → first event, whole turns,
   turn.finished after the last event, server CPU per relayed event.
3. Server memory per concurrent streaming turn, on a fresh server: (RSS during - RSS idle) / N.
2b. 200 chats on PostgreSQL + the Redis channel layer (db 14 of 127.0.0.1:6379, flushed before
   each server) with 1, 2 and 4 uvicorn workers (`--workers`), a fresh database per server.
   Skipped with `--skip-services` or when PostgreSQL / Redis do not answer.
2c. (only with `--parts 2c`) 200 chats with persistent database connections.
2m. (only with `--parts 2m`) Metrics' cost: part 2's load at the goal's chats on two servers
   started side by side, METRICS_ENABLED=false and true (SQLite, 1 worker each), in turns
   (`--metrics-rounds` each, off first); the median server CPU per relayed event of each.

With `--tls` the stand-in serves HTTPS, as the real agents do, and the site's reads of it pay for
TLS (the goals were set, and are judged, over plain HTTP). With `--timeline`, the goal runs of
parts 2 and 2b are also printed a quarter second at a time from the first ask: the ANSWERs sent
and their added latency, the server's CPU, the turns finished (which part of a run makes its
p99s: the asks' burst, the streams, or the answers ending together).

Then one line per goal, met or missed, with its figure (docs/PERFORMANCE.md, "Goals"); a goal whose
part did not run says so. The goals, on this machine, in the same run:

G1. PostgreSQL + Redis, 2 workers, 200 chats x 50 events/s x 150 events: ≥ 95% of the offered
    events/s delivered, added latency p99 ≤ 100 ms, ask → first event p99 ≤ 500 ms, every turn
    whole (all events, in order, exactly once, turn.finished "complete") with turn.finished
    ≤ 300 ms after its last event (p99).
G2. SQLite + in-memory channel layer, 1 worker, the same load: the same four goals.
G3. The 5,000-event stream: site ≤ 1.2x the direct read (medians).
G5. (part 2m) Metrics on cost ≤ 5% more server CPU per relayed event than metrics off.
G4. Server CPU per relayed event ≤ 50 µs on G2's run and on G1's (the CPU of uvicorn's master
    and all its workers), and memory per streaming turn ≤ 150 KiB (part 3).

Delivered events/s = the sum over turns of the turn's events / (its last event received - its
first event sent by the stand-in): the pace each stream is relayed at, as the goals count
it; the wait before the first event is the ask → first event goal. The tables also give events /
(last event received - first ask sent), which pays for that wait too. Offered = chats x rate.
The goals are judged at the largest `--concurrency` (200 by default). Nothing
fails the process. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _site as bench

REDIS_URL = "redis://127.0.0.1:6379/14"  # the bench's own Redis database, flushed per server
# Pub/sub channels are the whole server's, not a database's: a prefix of its own keeps the bench's
# frames from the pages of a test run or a site on the same Redis.
RELAY_PREFIX = "researchsite-bench:"
DELIVERED_GOAL = 0.95  # of the offered events/s
P99_GOAL_MS = 100
FIRST_EVENT_GOAL_MS = 500
FINISH_GAP_GOAL_MS = 300  # turn.finished after the turn's last event, p99
RATIO_GOAL = 1.2
CPU_GOAL_US = 50
METRICS_COST_GOAL = 1.05  # metrics on / off, server CPU per relayed event
MEMORY_GOAL_KIB = 150
GOAL_WORKERS = 2  # G1's server
GOAL_LOAD = (200, 50.0, 150)  # chats, events/s per turn, events per turn


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # Nine, not five: a run lasts ~0.1 s, so one stall of the machine moved a median of five.
    parser.add_argument("--repeat", type=int, default=9, help="runs of the 5,000-event stream")
    parser.add_argument("--events", type=int, default=5000, help="events in the long stream")
    parser.add_argument("--concurrency", default="1,50,200", help="concurrent chats to try")
    parser.add_argument("--turn-events", type=int, default=150, help="events per paced turn")
    parser.add_argument("--rate", type=float, default=50.0, help="events/s of each paced turn")
    parser.add_argument("--memory-chats", type=int, default=200, help="turns for the RSS figure")
    parser.add_argument("--skip-services", action="store_true", help="skip PostgreSQL + Redis")
    parser.add_argument(
        "--workers", default="1,2,4", help="uvicorn workers to try in part 2b (comma list)"
    )
    parser.add_argument("--parts", default="1,2,3,2b", help="which parts to run (also 2c)")
    parser.add_argument("--tls", action="store_true", help="the stand-in agent over HTTPS")
    parser.add_argument("--metrics-rounds", type=int, default=3, help="runs of each in part 2m")
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="the goal runs of parts 2 and 2b window by window: latency, server CPU, finishes",
    )
    args = parser.parse_args()
    args.chat_counts = [int(n) for n in args.concurrency.split(",")]
    args.goal_chats = max(args.chat_counts)
    args.worker_counts = [int(n) for n in args.workers.split(",")]
    return args


@dataclass
class Findings:
    """What the goals are judged on, filled in by the parts that ran."""

    ratio: float | None = None  # part 1
    sqlite: bench.ConcurrentResult | None = None  # part 2, at the goal's chats
    memory_kib: float | None = None  # part 3
    services: dict[int, bench.ConcurrentResult] = field(default_factory=dict)  # 2b, by workers
    services_skipped: str = "part 2b not run"
    metrics_cost: float | None = None  # part 2m: on / off


async def long_stream(site: bench.Site, upstream: bench.Upstream, args) -> float:
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
        f"\nMedian ratio {site_median / direct_median:.2f} (goal ≤ {RATIO_GOAL:g}); websocket "
        f"compression: {turn.compression}; site throughput {args.events / site_median:,.0f} "
        "events/s"
    )
    return site_median / direct_median


def concurrency_row(result: bench.ConcurrentResult, label: str = "") -> list[str]:
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(result.statuses.items()))
    return [
        label or str(result.chats),
        f"{result.events:,}",
        f"{result.offered_per_second:,.0f}",
        f"{result.events_per_second:,.0f} ({result.delivered_share:.0%}); "
        f"{result.events_per_second_from_ask:,.0f}",
        f"{result.p50_ms:.1f}",
        f"{result.p99_ms:.1f}",
        f"{result.p99_steady_ms:.1f}",
        f"{result.max_ms:.0f}",
        f"{result.first_event_p50_ms:.0f} / {result.first_event_p99_ms:.0f} / "
        f"{result.first_event_max_ms:.0f}",
        f"{result.finish_gap_p99_ms:.0f} / {result.finish_gap_max_ms:.0f}",
        f"{result.whole_turns}/{result.chats}",
        f"{result.server_cpu_share:.0%}",
        f"{result.server_cpu_us_per_event:.0f}",
        f"{result.client_cpu_share:.0%}",
        f"{result.upstream_cpu_share:.0%}",
        statuses + ("" if result.seqs_ok else "; EVENTS MISSING"),
    ]


CONCURRENCY_HEADERS = [
    "chats",
    "events",
    "offered ev/s",
    "delivered ev/s (of offered); from the first ask",
    "added p50 (ms)",
    "added p99 (ms)",
    "p99 after 1 s (ms)",
    "max (ms)",
    "ask → 1st event p50 / p99 / max (ms)",
    "turn.finished after last event p99 / max (ms)",
    "whole turns",
    "server CPU",
    "server CPU µs/event",
    "client CPU",
    "stand-in CPU",
    "outcome",
]

TABLE_NOTES = (
    "CPU columns are shares of one core over the run (2 cores in all); server CPU µs/event is "
    "server CPU seconds over the run / events delivered (uvicorn's master and all its workers). "
    "Delivered: each turn's events / (its last event received - its first event sent), summed; "
    "then all events / (last event received - first ask sent). "
    "Added latency is stand-in send time → client receive time, per ANSWER event. Whole turns: "
    'every event exactly once, in order, and turn.finished "complete".'
)


async def concurrency(site: bench.Site, upstream: bench.Upstream, args, findings: Findings) -> None:
    print(
        f"\n## 2. Concurrent chats, one turn each, {args.turn_events} events at "
        f"{args.rate:g} events/s per turn (SQLite, in-memory channel layer, 1 worker)\n"
    )
    rows = []
    for chats in args.chat_counts:
        result = await bench.concurrent_turns(
            site, upstream, chats=chats, events=args.turn_events, rate=args.rate
        )
        rows.append(concurrency_row(result))
        if chats == args.goal_chats:
            findings.sqlite = result
        await asyncio.sleep(1)  # let the finished turns' writes settle
    print(bench.table(CONCURRENCY_HEADERS, rows))
    print(f"\n{TABLE_NOTES}")
    if args.timeline and findings.sqlite is not None:
        print_timeline(f"{args.goal_chats} chats, SQLite, 1 worker", findings.sqlite)


def print_timeline(label: str, result: bench.ConcurrentResult) -> None:
    """The run window by window (--timeline): which part of it makes the p99s."""
    print(f"\n### Timeline: {label}\n")
    rows = [
        [
            f"{row.start:.2f}",
            f"{row.events:,}",
            f"{row.p50_ms:.1f}" if row.events else "",
            f"{row.p99_ms:.1f}" if row.events else "",
            f"{row.server_cores:.2f}",
            row.finished or "",
        ]
        for row in result.timeline
    ]
    headers = ["from (s)", "ANSWERs sent", "added p50 (ms)", "added p99 (ms)", "server cores"]
    print(bench.table([*headers, "turns finished"], rows))
    print(
        f"\nWindows of {bench.TIMELINE_WINDOW:g} s from the first ask: the ANSWER events the"
        " stand-in sent in each and their added latency; the server's CPU over it (master and"
        " workers, sampled every 0.1 s); the turns whose `turn.finished` arrived in it."
    )


async def memory(site: bench.Site, upstream: bench.Upstream, args) -> float:
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
    return (peak - idle) / n


async def services(upstream: bench.Upstream, args, findings: Findings) -> None:
    chats = args.goal_chats
    print(
        f"\n## 2b. {chats} chats on PostgreSQL + the Redis channel layer, uvicorn with "
        f"{', '.join(map(str, args.worker_counts))} workers\n"
    )
    rows = []
    for workers in args.worker_counts:
        database = bench.Database("postgres")
        bench.flush_redis(REDIS_URL)
        warm = 4 * workers  # a few turns at once, so that every worker has served one
        try:
            with bench.Site(
                "uvicorn",
                upstream.url,
                database,
                chats=chats + warm + 5,
                workers=workers,
                extra_env={"REDIS_URL": REDIS_URL, "RELAY_PREFIX": RELAY_PREFIX},
            ) as site:
                print(f"    {site.command_line()}")
                await bench.one_long_turn(site, 200)
                await bench.concurrent_turns(site, upstream, chats=warm, events=20, rate=100)
                await asyncio.sleep(1)
                result = await bench.concurrent_turns(
                    site, upstream, chats=chats, events=args.turn_events, rate=args.rate
                )
                findings.services[workers] = result
                label = f"{chats}, {workers} worker{'s' if workers > 1 else ''}"
                rows.append(concurrency_row(result, label))
        finally:
            database.drop()
    print()
    print(bench.table(CONCURRENCY_HEADERS, rows))
    print(
        f"\n{TABLE_NOTES} A fresh database and an empty Redis database per server. "
        "'NO turn.finished': every event arrived but the final frame never did "
        f"(waited {bench.FINISH_GRACE:g} s after the last event; docs/PERFORMANCE.md)."
    )
    if args.timeline:
        for workers, result in findings.services.items():
            print_timeline(f"{chats} chats, PostgreSQL + Redis, {workers} workers", result)


def goal_line(met: bool | None, text: str) -> str:
    """One goal's line: met, MISSED or skipped (None)."""
    word = "skipped" if met is None else "met" if met else "MISSED"
    return f"GOAL {word:<7} {text}"


def at_most(value: float, limit: float) -> bool:
    return not math.isnan(value) and value <= limit


def goals(args, findings: Findings) -> list[str]:
    """One line per goal (docs/PERFORMANCE.md, "Goals"), met or missed, with its figure."""
    lines = []
    g1_name = f"PostgreSQL + Redis, {GOAL_WORKERS} workers, {args.goal_chats} chats"
    g1 = findings.services.get(GOAL_WORKERS)
    if g1 is None:
        why = findings.services_skipped
        if why == "" and GOAL_WORKERS not in args.worker_counts:
            why = f"part 2b not run with {GOAL_WORKERS} workers"
        for what in ("delivered", "added latency p99", "ask → first event p99", "whole turns"):
            lines.append(goal_line(None, f"{g1_name}: {what} ({why})"))
    else:
        lines += concurrency_goals(g1_name, g1)
    g2_name = f"SQLite + in-memory layer, 1 worker, {args.goal_chats} chats"
    g2 = findings.sqlite
    if g2 is None:
        for what in ("delivered", "added latency p99", "ask → first event p99", "whole turns"):
            lines.append(goal_line(None, f"{g2_name}: {what} (part 2 not run)"))
    else:
        lines += concurrency_goals(g2_name, g2)
    if findings.ratio is None:
        lines.append(goal_line(None, f"one {args.events:,}-event stream (part 1 not run)"))
    else:
        lines.append(
            goal_line(
                findings.ratio <= RATIO_GOAL,
                f"one {args.events:,}-event stream: site {findings.ratio:.2f}x the direct read "
                f"(≤ {RATIO_GOAL:g}x)",
            )
        )
    for name, result, part in ((g2_name, g2, "part 2"), (g1_name, g1, "part 2b")):
        if result is None:
            lines.append(goal_line(None, f"server CPU per relayed event, {name} ({part} not run)"))
        else:
            lines.append(
                goal_line(
                    at_most(result.server_cpu_us_per_event, CPU_GOAL_US),
                    f"server CPU per relayed event: {result.server_cpu_us_per_event:,.1f} µs on "
                    f"{name} (≤ {CPU_GOAL_US} µs)",
                )
            )
    if findings.memory_kib is None:
        lines.append(goal_line(None, "server memory per streaming turn (part 3 not run)"))
    else:
        lines.append(
            goal_line(
                findings.memory_kib <= MEMORY_GOAL_KIB,
                f"server memory per streaming turn: {findings.memory_kib:.0f} KiB "
                f"(≤ {MEMORY_GOAL_KIB} KiB; {args.memory_chats} turns, 1 worker)",
            )
        )
    if findings.metrics_cost is not None:  # part 2m runs only when asked for
        lines.append(
            goal_line(
                findings.metrics_cost <= METRICS_COST_GOAL,
                f"metrics' cost: {findings.metrics_cost:.3f}x the server CPU per relayed event"
                f" with METRICS_ENABLED=false (≤ {METRICS_COST_GOAL:g}x)",
            )
        )
    return lines


def concurrency_goals(name: str, result: bench.ConcurrentResult) -> list[str]:
    unfinished = f" ({result.unfinished} never got turn.finished)" if result.unfinished else ""
    return [
        goal_line(
            result.delivered_share >= DELIVERED_GOAL,
            f"{name}: delivered {result.delivered_share:.0%} of offered "
            f"({result.events_per_second:,.0f} of {result.offered_per_second:,.0f} events/s, "
            f"each turn from its first event sent to its last received; "
            f"{result.events_per_second_from_ask:,.0f} counted from the first ask; "
            f"≥ {DELIVERED_GOAL:.0%})",
        ),
        goal_line(
            at_most(result.p99_ms, P99_GOAL_MS),
            f"{name}: added latency p99 {result.p99_ms:,.0f} ms (≤ {P99_GOAL_MS} ms)",
        ),
        goal_line(
            at_most(result.first_event_p99_ms, FIRST_EVENT_GOAL_MS),
            f"{name}: ask → first event p99 {result.first_event_p99_ms:,.0f} ms "
            f"(≤ {FIRST_EVENT_GOAL_MS:,} ms)",
        ),
        goal_line(
            result.whole_turns == result.chats
            and at_most(result.finish_gap_p99_ms, FINISH_GAP_GOAL_MS),
            f"{name}: {result.whole_turns}/{result.chats} whole, turn.finished after the last "
            f"event p99 {result.finish_gap_p99_ms:,.0f} ms, max {result.finish_gap_max_ms:,.0f} ms"
            f"{unfinished} (≤ {FINISH_GAP_GOAL_MS:,} ms p99)",
        ),
    ]


async def metrics_cost(upstream: bench.Upstream, args, findings: Findings) -> None:
    chats, rounds = args.goal_chats, args.metrics_rounds
    print(
        f"\n## 2m. Metrics' cost: {chats} chats, {args.turn_events} events at {args.rate:g}"
        f" events/s per turn, METRICS_ENABLED=false and true in turns, {rounds} runs each"
        " (SQLite, 1 worker each)\n"
    )
    databases = {name: bench.Database("sqlite") for name in ("false", "true")}
    rows, per_event = [], {"false": [], "true": []}
    try:
        sites = {
            name: bench.Site(
                "uvicorn",
                upstream.url,
                database,
                chats=chats * rounds + 10,
                extra_env={"METRICS_ENABLED": name},
            )
            for name, database in databases.items()
        }
        with sites["false"], sites["true"]:
            for name, site in sites.items():
                print(f"    {site.command_line()} (METRICS_ENABLED={name})")
                await bench.one_long_turn(site, 500)  # warm-up, not measured
            for _ in range(rounds):
                for name, site in sites.items():  # off, then on: each round alike
                    result = await bench.concurrent_turns(
                        site, upstream, chats=chats, events=args.turn_events, rate=args.rate
                    )
                    per_event[name].append(result.server_cpu_us_per_event)
                    rows.append(concurrency_row(result, f"{chats}, metrics {name}"))
                    await asyncio.sleep(1)  # let the finished turns' writes settle
    finally:
        for database in databases.values():
            database.drop()
    print()
    print(bench.table(CONCURRENCY_HEADERS, rows))
    off, on = (statistics.median(per_event[name]) for name in ("false", "true"))
    findings.metrics_cost = on / off
    print(
        f"\nServer CPU per relayed event, medians: off {off:.1f} µs, on {on:.1f} µs"
        f" ({on / off:.3f}x). {TABLE_NOTES}"
    )


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
    findings = Findings()
    print("# Streaming benchmark\n")
    print(f"Machine: {bench.machine()}")
    print(f"Command: {bench.invocation()}")
    print(f"Clients: one process, {loop_name} event loop, `websockets` + httpx")
    started = time.monotonic()
    if args.tls:
        print("Agent:   the stand-in over HTTPS (--tls)")
    with bench.Upstream(tls=args.tls) as upstream:
        if parts & {"1", "2"}:
            database = bench.Database("sqlite")
            try:
                chats = args.repeat + sum(args.chat_counts) + 5
                with bench.Site("uvicorn", upstream.url, database, chats=chats) as site:
                    print(f"Site:    {site.command_line()}")
                    await bench.one_long_turn(site, 500)  # warm-up, not measured
                    if "1" in parts:
                        findings.ratio = await long_stream(site, upstream, args)
                    if "2" in parts:
                        await concurrency(site, upstream, args, findings)
            finally:
                database.drop()
        if "3" in parts:
            database = bench.Database("sqlite")
            try:
                chats = args.memory_chats + 5
                with bench.Site("uvicorn", upstream.url, database, chats=chats) as site:
                    findings.memory_kib = await memory(site, upstream, args)
            finally:
                database.drop()
        if "2b" not in parts:
            pass
        elif args.skip_services:
            findings.services_skipped = "part 2b skipped: --skip-services"
            print("\n(PostgreSQL + Redis run skipped: --skip-services)")
        elif not bench.services_available():
            findings.services_skipped = "part 2b skipped: PostgreSQL / Redis not reachable"
            print("\n(PostgreSQL + Redis run skipped: not reachable on 127.0.0.1:5432 / :6379)")
        else:
            findings.services_skipped = ""
            await services(upstream, args, findings)
        if "2c" in parts:
            await persistent_connections(upstream, args)
        if "2m" in parts:
            await metrics_cost(upstream, args, findings)
    print("\n## Goals\n")
    chats, rate, events = GOAL_LOAD
    if (args.goal_chats, args.rate, args.turn_events) != GOAL_LOAD:
        print(
            f"(The goals are set at {chats} chats x {rate:g} events/s x {events} events; this "
            f"run: {args.goal_chats} x {args.rate:g} x {args.turn_events}.)\n"
        )
    print("\n".join(goals(args, findings)))
    print(f"\nTotal time: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    asyncio.run(main(bench.install_uvloop()))
