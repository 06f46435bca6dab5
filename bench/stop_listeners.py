"""Hearing stop requests: a channel-layer listener for every run against the process's one.

    .venv/bin/python bench/stop_listeners.py [--in-memory] [--runs 200] [--hold 1.0] [--rounds 5]

200 runs start together and stream for `--hold` seconds. Each way of hearing a stop request
is what a run costs the process beside its stream, in turns, a round each:

- a listener a run: a channel of its own in a group of its own (`turn.<id>.control`), a task
  receiving on it, then leaving the group and closing the task with a message to its channel;
- the process's listener: `chats.run.registry.StopListener`, the one listener every run of the
  process shares (started by the first, closed once at the end).

On the Redis channel layer (db 13 of 127.0.0.1:6379, flushed before and after) or, with
`--in-memory`, the site's in-memory layer. Figures: this process's CPU time per run, median of
the rounds. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine
from _site import invocation, setup_django, table

REDIS_URL = "redis://127.0.0.1:6379/13"
CLOSE = "bench.listener.close"


async def a_listener_a_run(turn_id: int, hold: float) -> None:
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(f"turn.{turn_id}.control", channel)

    async def listen() -> None:
        while (await layer.receive(channel)).get("type") != CLOSE:
            pass

    listener = asyncio.create_task(listen())
    await asyncio.sleep(hold)
    await layer.group_discard(f"turn.{turn_id}.control", channel)
    await layer.send(channel, {"type": CLOSE})
    await asyncio.wait([listener], timeout=5)


async def rounds(runs: int, hold: float, count: int) -> dict[str, list[float]]:
    from channels.layers import get_channel_layer

    from chats.run.registry import RunRegistry

    async def the_process_listener(registry: RunRegistry) -> None:
        await registry.stops.listening()
        await asyncio.sleep(hold)

    figures: dict[str, list[float]] = {"a listener a run": [], "the process's listener": []}
    for _ in range(count):
        cpu = time.process_time()
        await asyncio.gather(*(a_listener_a_run(i, hold) for i in range(runs)))
        figures["a listener a run"].append((time.process_time() - cpu) / runs)

        registry = RunRegistry()
        cpu = time.process_time()
        await asyncio.gather(*(the_process_listener(registry) for _ in range(runs)))
        await registry.stops.close()
        figures["the process's listener"].append((time.process_time() - cpu) / runs)
    layer = get_channel_layer()
    await layer.flush()
    if hasattr(layer, "close_pools"):
        await layer.close_pools()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-memory", action="store_true")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--hold", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"## Hearing stop requests (`{invocation()}`)\n")
    print(machine())
    setup_django(
        DATABASE_URL="sqlite://:memory:",
        REDIS_URL="" if args.in_memory else REDIS_URL,
        SECRET_KEY="bench-stop-listeners-not-secret",
        LOG_LEVEL="WARNING",
    )
    figures = asyncio.run(rounds(args.runs, args.hold, args.rounds))
    layer = "in-memory" if args.in_memory else "Redis"
    print(f"\n{args.runs} runs at once, held {args.hold:g} s, {args.rounds} rounds, {layer}:\n")
    rows = [
        [
            way,
            f"{statistics.median(values) * 1e6:,.0f}",
            " / ".join(f"{v * 1e6:,.0f}" for v in values),
        ]
        for way, values in figures.items()
    ]
    print(table(["way", "CPU µs a run (median)", "each round"], rows))


if __name__ == "__main__":
    main()
