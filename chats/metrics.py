"""The site's Prometheus metrics (served at /metrics by researchsite/operations.py).

Counted where the work is done, once per batch where there is a batch: the event log counts a
tick's events in one call, not one call per event. With METRICS_ENABLED=false every metric here
is a no-op object, so the same code runs with or without them (bench/streaming.py compares
both). Gauges sum over live processes in prometheus_client's multiprocess mode.
"""

from __future__ import annotations

import asyncio
import bisect
import os
from collections import Counter as Tally
from typing import Any

from django.conf import settings
from prometheus_client import Counter, Gauge, Histogram

# Seconds: a frame a few milliseconds late is the goal (docs/PERFORMANCE.md); seconds mean trouble.
DELAY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
FLUSH_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)


class NoMetric:
    """A metric that records nothing (METRICS_ENABLED=false)."""

    def labels(self, *args: Any, **kwargs: Any) -> NoMetric:
        return self

    def inc(self, amount: float = 1) -> None:
        pass

    def dec(self, amount: float = 1) -> None:
        pass

    def observe(self, amount: float) -> None:
        pass


class ObservedPerLoopTurn:
    """A histogram whose observations in one turn of the event loop are recorded together, at
    its end: each bucket's count once, and the sum once.

    A tick delivers a frame to every page of the process in one turn of the loop, and
    prometheus_client's `observe` takes a lock for the sum and one for the bucket (a file write
    each in multiprocess mode): ~1.8 µs a frame, as much as delivering it (docs/PERFORMANCE.md,
    "Metrics' cost"). What is exposed is what one `observe` per value would have made. Outside
    an event loop each value is observed at once.
    """

    def __init__(self, histogram: Histogram) -> None:
        self.histogram = histogram
        self._values: list[float] = []
        self._loop: asyncio.AbstractEventLoop | None = None  # where a record is due

    def observe(self, amount: float) -> None:
        values = self._values
        if not values or self._loop is None or self._loop.is_closed():
            # The first of this turn (or of a loop closed before its record came).
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop: nothing would record it later
                self.histogram.observe(amount)
                return
            self._loop.call_soon(self.record)
        values.append(amount)

    def record(self) -> None:
        """Record what was observed since the last call."""
        values, self._values, self._loop = self._values, [], None
        histogram = self.histogram
        bounds = histogram._upper_bounds  # prometheus_client's own: pinned, and tested
        histogram._sum.inc(sum(values))
        for bucket, count in Tally(bisect.bisect_left(bounds, v) for v in values).items():
            histogram._buckets[bucket].inc(count)


def _metrics() -> dict[str, Any]:
    if not settings.METRICS_ENABLED:
        off = NoMetric()
        return dict.fromkeys(
            (
                "turns_started",
                "turns_finished",
                "events_relayed",
                "event_delay",
                "open_websockets",
                "streaming_turns",
                "upstream_errors",
                "event_log_flush",
                "tokens",
                "cost",
            ),
            off,
        )
    return {
        "turns_started": Counter(
            "researchsite_turns_started", "Turns whose run began in this process.", ["agent"]
        ),
        "turns_finished": Counter(
            "researchsite_turns_finished",
            "Turns whose run ended in this process, by how they ended.",
            ["agent", "status"],
        ),
        "events_relayed": Counter(
            "researchsite_events_relayed",
            "Agent events stored in the event log and relayed to the chats' pages.",
        ),
        "event_delay": ObservedPerLoopTurn(
            Histogram(
                "researchsite_event_delay_seconds",
                "From the agent's event being received to its frame being written to a page in"
                " the same process (the oldest event of the tick's batch).",
                buckets=DELAY_BUCKETS,
            )
        ),
        "open_websockets": Gauge(
            "researchsite_open_websockets",
            "Chat pages connected to this process.",
            multiprocess_mode="livesum",
        ),
        "streaming_turns": Gauge(
            "researchsite_streaming_turns",
            "Turns being run by this process.",
            multiprocess_mode="livesum",
        ),
        "upstream_errors": Counter(
            "researchsite_upstream_errors",
            "Agent requests that failed or were cut off, by agent and kind of error.",
            ["agent", "kind"],
        ),
        "event_log_flush": Histogram(
            "researchsite_event_log_flush_seconds",
            "Time to write one tick's batch of events to the database.",
            buckets=FLUSH_BUCKETS,
        ),
        "tokens": Counter(
            "researchsite_tokens",
            "Tokens of finished turns, as their agents reported them, by kind: input (not"
            " cached), cached (input read from the provider's cache) and output.",
            ["agent", "model", "kind"],
        ),
        "cost": Counter(
            "researchsite_cost",
            "Dollars of finished turns' priced usage (models of unknown price count nothing).",
            ["agent"],
        ),
    }


_all = _metrics()
TURNS_STARTED = _all["turns_started"]
TURNS_FINISHED = _all["turns_finished"]
EVENTS_RELAYED = _all["events_relayed"]
EVENT_DELAY = _all["event_delay"]
OPEN_WEBSOCKETS = _all["open_websockets"]
STREAMING_TURNS = _all["streaming_turns"]
UPSTREAM_ERRORS = _all["upstream_errors"]
EVENT_LOG_FLUSH = _all["event_log_flush"]
TOKENS = _all["tokens"]
COST = _all["cost"]


async def forget_this_process() -> None:
    """In multiprocess mode (PROMETHEUS_MULTIPROC_DIR), drop this exiting worker's gauges from
    the sums the others report; its counters stay counted."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(os.getpid())
