"""Work for the database thread that waits in one queue and goes in one trip.

Starting a turn and storing a finished one each take a trip to the database thread: a few
queries and a commit. One at a time, a burst (every page of a team asking at once, 200 answers
ending together) queues on that one thread and pays the round trips and commit of each in
turn: at 200 asks the last waited seconds for its first event (docs/PERFORMANCE.md, "Bursts go
to the database together"). Here the items waiting when the thread comes free go in one trip and
one transaction: the first item of a quiet moment goes at once, the rest of a burst follow it
together.

Work someone waits for (an answer to show, a question to start) goes first: a batch of work that
can wait (`background=True`: the figure checks of answers already shown) waits until the other
batches of the loop have had nothing new for FOREGROUND_SETTLE seconds and nothing on the
database thread (`foreground_done`), for up to BACKGROUND_WAIT seconds, so a burst of checks
does not sit between the finishes of the burst that caused it, nor wait for ever behind a busy
site.

One item's failure stays its own: when the database refuses a batch for what it holds, each of
its items is tried again alone. When the database itself is failing (down, locked past its
timeout), the batch fails whole at once: fifty more attempts, one after another on the one
database thread, would only hold up everything else waiting for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import math
from collections.abc import Awaitable, Callable, Iterable
from typing import Generic, TypeVar

from channels.db import database_sync_to_async
from django.db import InterfaceError, OperationalError

from chats.log_context import shared_task
from chats.loop.per_loop import PerLoop

logger = logging.getLogger(__name__)

Item = TypeVar("Item")
Result = TypeVar("Result")

# The most items in one transaction: a bigger batch holds its rows' locks longer and makes its
# first item wait for its last.
MAX_BATCH = 50

# Errors of the database rather than of the items: trying each item alone would fail as well.
DATABASE_FAILING = (OperationalError, InterfaceError)

# The longest a background batch waits for the others to be done, each trip; and how long the
# foreground must have had nothing new before it counts as done (the gaps within a burst of
# finishes are shorter).
BACKGROUND_WAIT = 2.0
FOREGROUND_SETTLE = 0.1


class _Foreground:
    """How many items of this loop's foreground batches wait for or are on the database thread
    (`quiet` is set when none), and when the last was submitted."""

    def __init__(self) -> None:
        self.items = 0
        self.quiet = asyncio.Event()
        self.quiet.set()
        self.submitted_at = -math.inf  # on the loop's clock

    def add(self, count: int) -> None:
        self.items += count
        if count > 0:
            self.submitted_at = asyncio.get_running_loop().time()
        if self.items:
            self.quiet.clear()
        else:
            self.quiet.set()


_foreground = PerLoop(_Foreground)


async def foreground_done(longest: float = BACKGROUND_WAIT) -> None:
    """Return once no foreground batch of this loop has had items for FOREGROUND_SETTLE seconds
    (at once if none has had any for that long), or after `longest` seconds: work that can wait
    goes after a burst of asks or finishes, not between its batches."""
    foreground = _foreground()
    loop = asyncio.get_running_loop()
    give_up = loop.time() + longest
    while True:
        if not foreground.quiet.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(foreground.quiet.wait(), give_up - loop.time())
        settled = foreground.submitted_at + FOREGROUND_SETTLE
        now = loop.time()
        if now >= min(settled, give_up):
            return
        await asyncio.sleep(min(settled, give_up) - now)


class DatabaseBatches(Generic[Item, Result]):
    """Run `run_batch(items)` on the database thread for the items waiting together.

    `run_batch` returns one outcome per item, in order: its result, or the exception that item
    failed with. `then(results)`, on the event loop, follows up the batch's results together
    (one publish for all of them, say) before their callers hear of them, and runs even when a
    caller has gone (cancelled): what the batch stored must be acted on all the same. The next
    batch goes to the database meanwhile: a slow follow-up (Redis away) holds up no one else.
    """

    def __init__(
        self,
        run_batch: Callable[[list[Item]], list[Result | Exception]],
        *,
        name: str,
        then: Callable[[list[Result]], Awaitable[None]] | None = None,
        background: bool = False,
    ) -> None:
        self.run_batch = run_batch
        self.name = name
        self.then = then
        self.background = background
        self._waiting: list[tuple[Item, asyncio.Future]] = []
        self._worker: asyncio.Task | None = None
        self._follow_ups: set[asyncio.Task] = set()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    async def submit(self, item: Item) -> Result:
        """Wait for the item's batch; return its result or raise its exception."""
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if not self.background:
            _foreground().add(1)
        if self._worker is None or self._worker.done():
            self._worker = shared_task(self._work(), name=f"{self.name}-batches")
        return await future

    async def close(self) -> None:
        """Take no more items (see `closed`) and wait for those already submitted."""
        self._closed = True
        if self._worker is not None:
            await asyncio.gather(self._worker, return_exceptions=True)
        await asyncio.gather(*self._follow_ups, return_exceptions=True)

    async def _work(self) -> None:
        foreground = _foreground()  # this loop's, counted as the trips go
        while self._waiting:
            if self.background:
                await foreground_done()
            batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
            items = [item for item, _ in batch]
            try:
                outcomes = await database_sync_to_async(self._in_one_trip)(items)
            except Exception as error:  # a bug: _in_one_trip gives every failure to its item
                logger.exception("A batch of %d %s items failed", len(items), self.name)
                outcomes = [error] * len(items)
            finally:
                if not self.background:
                    foreground.add(-len(items))
            follow_up = asyncio.create_task(self._follow_up(batch, outcomes))
            self._follow_ups.add(follow_up)
            follow_up.add_done_callback(self._follow_ups.discard)

    async def _follow_up(
        self, batch: list[tuple[Item, asyncio.Future]], outcomes: list[Result | Exception]
    ) -> None:
        results = [outcome for outcome in outcomes if not isinstance(outcome, Exception)]
        if results and self.then is not None:
            try:
                await self.then(results)
            except Exception:  # stored all the same; `then` says what it could not do
                logger.exception("Following up %d %s items failed", len(results), self.name)
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            if future.done():  # its caller has gone: nobody else will say what went wrong
                if isinstance(outcome, Exception):
                    logger.warning("A %s item failed after its caller left: %r", self.name, outcome)
                continue
            if isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    def _in_one_trip(self, items: list[Item]) -> list[Result | Exception]:
        """Run the items together; if that fails, run each alone so that only the item the
        database refuses fails (database thread)."""
        try:
            outcomes = self.run_batch(items)
        except Exception as error:
            if len(items) == 1 or isinstance(error, DATABASE_FAILING):
                return [error] * len(items)
            logger.warning("%d %s items failed together; trying each alone", len(items), self.name)
            return [outcome for item in items for outcome in self._in_one_trip([item])]
        if len(outcomes) != len(items):
            raise RuntimeError(f"{self.name}: {len(outcomes)} outcomes for {len(items)} items")
        return outcomes


def one_each(results: Iterable[Result | None]) -> list[Result | None]:
    """A batch's results, each object handed out once as itself and again only as a shallow copy:
    two waiters given the same row (two pages of one chat, one user's two sockets) may each
    change their own."""
    handed_out: set[int] = set()
    owned: list[Result | None] = []
    for result in results:
        if result is not None:
            if id(result) in handed_out:
                result = copy.copy(result)
            handed_out.add(id(result))
        owned.append(result)
    return owned
