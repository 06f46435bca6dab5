"""Check a finished answer's claims against the pages it cites, after the answer is shown.

A turn that cites web pages without passages finishes with those pages marked as being read
(`citations.pages.with_pending_pages`: its summary says "Checking 3 sources…"). Its run then
starts `check_turn_sources` as a task of the process, handing it the stored turn and its cited
answer (`PagesToCheck`): the pages come from the cache (`citations.SourcePage`, fresh for
SOURCE_FETCH_MAX_AGE_HOURS) or are fetched (`chats.verify.fetch`), the best passage of each page
is chosen for each claim and the figures checked again (`citations.pages.with_pages`), the
references and the cited HTML are stored, and the turn is handed back to the run, which sends
its pages the checked answer (a `turn.checked` frame).

Answers that end together start their checks together: their cache lookups go to the database
in one trip, their results in another, and their answers in one publish, as finishes do
(`chats.loop.batches`); checking and rendering an answer again runs on the CPU thread
(`chats.loop.cpu_thread`), so a burst of checks holds up no finish queued for the database.

Bounded and fair: a turn reads at most SOURCE_FETCH_MAX_PAGES_PER_TURN pages (the first cited;
the rest are "not read: over the limit of 20 pages a turn"); a process fetches at most
`MAX_CONCURRENT` pages at once, at most `MAX_PER_USER` of them for one user, and a page waiting
for a slot is served user by user in turn (`FairSlots`), so one user's slow pages never hold
another user's check. Every page's failure stays that page's: it is recorded as its problem, the
other pages are read, checked and cached as usual.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from chats.loop.batches import DatabaseBatches, foreground_done
from chats.loop.cpu_thread import on_cpu_thread
from chats.loop.per_loop import PerLoop
from chats.models import Turn
from chats.row_updates import update_rows
from chats.verify.fetch import FetchedPage, PageFetcher
from citations.models import SourcePage
from citations.pages import with_pages
from citations.references import PageRead
from citations.render_html import render_html
from citations.resolve import CitedAnswer
from citations.selectors import cited_answer_for_turn, source_pages_fresh
from citations.services import citations_store_pages_for_turns, source_page_save

logger = logging.getLogger(__name__)

# Told of the turns whose pages were read (or given up on) and stored together: the run announces
# their cards.
OnChecked = Callable[[list[Turn]], Awaitable[None]]

MAX_CONCURRENT = 16  # pages fetched (and read) at once by a process
MAX_PER_USER = 4  # of which for one user


class FairSlots:
    """At most `total` pages at once, at most `per_user` of them one user's; when a slot frees,
    the users waiting for one are served in turn, one page each, whatever the size of their
    queues."""

    def __init__(self, total: int = MAX_CONCURRENT, per_user: int = MAX_PER_USER) -> None:
        self.total = total
        self.per_user = per_user
        self.running = 0
        self.running_for: dict[object, int] = {}
        self.waiting: OrderedDict[object, deque[asyncio.Future[None]]] = OrderedDict()

    @asynccontextmanager
    async def slot(self, user: object) -> AsyncIterator[None]:
        """Hold one slot for `user` while the block runs."""
        if self._free_for(user) and user not in self.waiting:
            self._take(user)
        else:
            granted = asyncio.get_running_loop().create_future()
            self.waiting.setdefault(user, deque()).append(granted)
            try:
                await granted
            except asyncio.CancelledError:
                if granted.done() and not granted.cancelled():
                    self._give_back(user)  # granted as it was cancelled: pass it on
                else:
                    self._forget(user, granted)
                raise
        try:
            yield
        finally:
            self._give_back(user)

    def _free_for(self, user: object) -> bool:
        return self.running < self.total and self.running_for.get(user, 0) < self.per_user

    def _take(self, user: object) -> None:
        self.running += 1
        self.running_for[user] = self.running_for.get(user, 0) + 1

    def _give_back(self, user: object) -> None:
        self.running -= 1
        self.running_for[user] -= 1
        if not self.running_for[user]:
            del self.running_for[user]
        if user in self.waiting:
            self.waiting.move_to_end(user)  # the others first: it was just served
        self._serve()

    def _serve(self) -> None:
        """Grant free slots to the waiting users, in turn: each served user goes to the back."""
        for user in list(self.waiting):
            if self.running >= self.total:
                return
            if not self._free_for(user):
                continue
            queue = self.waiting.pop(user)
            granted = queue.popleft()
            if queue:
                self.waiting[user] = queue  # to the back of the line
            self._take(user)
            granted.set_result(None)

    def _forget(self, user: object, granted: asyncio.Future[None]) -> None:
        queue = self.waiting.get(user)
        if queue is not None and granted in queue:
            queue.remove(granted)
            if not queue:
                del self.waiting[user]


class _Checks:
    """This event loop's checks: their tasks kept alive, pages being fetched, by URL, so that
    turns citing one page at once fetch it once, and the fetch slots shared between users."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task] = set()
        self.fetching: dict[str, asyncio.Future[SourcePage]] = {}
        self.slots = FairSlots()


_checks = PerLoop(_Checks)


@dataclass(frozen=True)
class PagesToCheck:
    """A stored turn whose answer cites pages still to read, with its cited answer as stored:
    what the run that finished it holds, so the check reads neither back."""

    turn: Turn  # its chat loaded: the owner's share of the fetch slots
    cited: CitedAnswer

    @property
    def pending(self) -> dict[str, str]:
        """The URL of each page still to read, by source key."""
        return {key: read.url for key, read in self.cited.pages.items() if read.pending}


def start_source_checks(checks: Iterable[PagesToCheck], on_checked: OnChecked) -> None:
    """Check each turn's cited pages in the background; once its reads are stored, the turn
    goes to `on_checked`, with the others stored in the same trip."""
    tasks = _checks().tasks
    for check in checks:
        task = asyncio.create_task(
            _check_safely(check, on_checked), name=f"source-check-{check.turn.pk}"
        )
        tasks.add(task)
        task.add_done_callback(tasks.discard)


async def stored_pages_to_check(turn_id: int) -> PagesToCheck:
    """The stored turn and its cited answer as its references say, for a check that no run
    handed over."""
    turn, cited = await database_sync_to_async(_turn_and_answer)(turn_id)
    return PagesToCheck(turn, cited)


async def wait_for_source_checks() -> None:
    """Wait until this loop's checks are done (tests and benchmarks)."""
    while tasks := _checks().tasks:
        await asyncio.wait(list(tasks))


async def stop_source_checks() -> None:
    """Stop this loop's checks (the server is shutting down); each records why it stopped."""
    tasks = list(_checks().tasks)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await get_checked_batches().close()  # what they stored is handed back


async def _check_safely(check: PagesToCheck, on_checked: OnChecked) -> None:
    turn_id = check.turn.pk
    try:
        await check_turn_sources(check, on_checked)
    except asyncio.CancelledError:
        # A turn must not say "Checking 3 sources…" for ever: its pages count as unread.
        await _store_unread(check, "the server restarted before it was read", on_checked)
        raise
    except Exception:
        logger.exception("Checking the cited pages of turn %s failed", turn_id)
        await _store_unread(check, "the check failed on our side", on_checked)


async def _store_unread(check: PagesToCheck, problem: str, on_checked: OnChecked) -> None:
    reads = {key: PageRead(url=url, problem=problem) for key, url in check.pending.items()}
    try:
        await _store(check, reads, on_checked)
    except Exception:
        logger.exception("Recording the unread pages of turn %s failed", check.turn.pk)


async def check_turn_sources(
    check: PagesToCheck, on_checked: OnChecked | None = None
) -> Turn | None:
    """Read the turn's pending pages, check its claims against them and store the result;
    return the turn with its new cited HTML (None if no page was pending, or the turn is gone),
    once `on_checked` has it."""
    pending = check.pending
    if not pending:
        return None
    limit = settings.SOURCE_FETCH_MAX_PAGES_PER_TURN
    order = {source.key: source.number for source in check.cited.sources}
    keys = sorted(pending, key=lambda key: order.get(key, len(order)))
    urls = list(dict.fromkeys(pending[key] for key in keys))
    wanted, over = urls[:limit], set(urls[limit:])
    pages = await _pages(wanted, user=check.turn.chat.owner_id)
    reads = {
        key: PageRead(url=url, problem=f"over the limit of {limit} pages a turn")
        if url in over
        else _page_read(pages[url])
        for key, url in pending.items()
    }
    return await _store(check, reads, on_checked)


def _turn_and_answer(turn_id: int) -> tuple[Turn, CitedAnswer]:
    turn = Turn.objects.select_related("chat").get(pk=turn_id)
    return turn, cited_answer_for_turn(turn)


async def _pages(urls: list[str], *, user: object) -> dict[str, SourcePage]:
    """Each URL's page: from the cache when fresh, else fetched now (once per URL per loop, in
    `user`'s share of the fetch slots)."""
    pages = await get_fresh_page_batches().submit(urls)
    missing = [url for url in urls if url not in pages]
    if not missing:
        return pages
    checks = _checks()
    waiting = {url: checks.fetching[url] for url in missing if url in checks.fetching}
    mine = [url for url in missing if url not in waiting]
    loop = asyncio.get_running_loop()
    for url in mine:
        checks.fetching[url] = loop.create_future()
    try:
        if mine:
            async with PageFetcher(allowed_hosts=settings.SOURCE_FETCH_ALLOWED_HOSTS) as fetcher:
                fetched = await asyncio.gather(
                    *(_fetch_in_turn(fetcher, url, checks.slots, user) for url in mine)
                )
            saved = await database_sync_to_async(_save_pages)(fetched)
            for url in mine:
                checks.fetching[url].set_result(saved[url])
                pages[url] = saved[url]
    except BaseException as error:
        for url in mine:
            if not checks.fetching[url].done():
                checks.fetching[url].set_exception(error)
                checks.fetching[url].exception()  # retrieved: no warning when none waits
        raise
    finally:
        for url in mine:
            checks.fetching.pop(url, None)
    for url, future in waiting.items():
        pages[url] = await asyncio.shield(future)
    return pages


async def _fetch_in_turn(
    fetcher: PageFetcher, url: str, slots: FairSlots, user: object
) -> FetchedPage:
    """Fetch and read one page in `user`'s share of the slots; whatever fails is its problem."""
    async with slots.slot(user):
        try:
            return await fetcher.fetch(url)
        except Exception:  # fetch says what went wrong; anything else is ours, and this page's
            logger.exception("Reading the cited page %s failed", url)
            return FetchedPage(url, problem="the check failed on our side")


def _save_pages(fetched: list[FetchedPage]) -> dict[str, SourcePage]:
    """Keep each page in the cache; one that cannot be stored is still used for this check."""
    saved = {}
    for page in fetched:
        fields = {
            "url": page.url,
            "final_url": page.final_url,
            "status_code": page.status_code,
            "content_type": page.content_type,
            "problem": page.problem,
            "text": page.text,
        }
        try:
            saved[page.url] = source_page_save(**fields)
        except IntegrityError:  # another process stored it first: ours is as good
            saved[page.url] = SourcePage(**fields, fetched_at=timezone.now())
        except Exception:
            logger.exception("Storing the cited page %s failed", page.url)
            saved[page.url] = SourcePage(**fields, fetched_at=timezone.now())
    return saved


def _page_read(page: SourcePage) -> PageRead:
    return PageRead(
        url=page.url,
        final_url=page.final_url,
        fetched_on=page.fetched_at.date() if page.fetched_at else None,
        problem=page.problem,
        text=page.text,
    )


def _fresh_pages_of_many(url_lists: list[list[str]]) -> list[dict[str, SourcePage]]:
    """The cached pages of each list of URLs, in one query for all (database thread)."""
    max_age = timedelta(hours=settings.SOURCE_FETCH_MAX_AGE_HOURS)
    fresh = source_pages_fresh(
        urls=list({url for urls in url_lists for url in urls}), max_age=max_age
    )
    return [{url: fresh[url] for url in urls if url in fresh} for urls in url_lists]


# The cache lookups of checks that start together (answers that ended together): one query.
get_fresh_page_batches = PerLoop(
    lambda: DatabaseBatches(_fresh_pages_of_many, name="cited pages", background=True)
)


@dataclass(frozen=True)
class _Checked:
    """A turn's checked answer and its new cited HTML, to store; who to hand the turn to."""

    turn: Turn
    cited: CitedAnswer
    html: str
    on_checked: OnChecked | None


async def _store(
    check: PagesToCheck, reads: dict[str, PageRead], on_checked: OnChecked | None
) -> Turn | None:
    """Check the claims against the pages read and render the answer again (CPU thread), then
    store both with the checks that end together (database thread); None if the turn is gone."""
    turn = check.turn
    await foreground_done()  # answers being finished first: this one is shown already
    checked, html = await on_cpu_thread(_checked_html, check.cited, reads, turn.pk, later=True)
    stored = await get_checked_batches().submit(_Checked(turn, checked, html, on_checked))
    return stored.turn if stored is not None else None


def _checked_html(
    cited: CitedAnswer, reads: dict[str, PageRead], turn_id: int
) -> tuple[CitedAnswer, str]:
    checked = with_pages(cited, reads)
    return checked, render_html(checked, doc_id=f"t{turn_id}")


def _store_checked_many(items: list[_Checked]) -> list[_Checked | None]:
    """Store the checked claims and the new cited HTML of each turn still there, in one
    transaction (database thread)."""
    with transaction.atomic():
        present = set(
            Turn.objects.filter(pk__in=[item.turn.pk for item in items])
            .order_by()
            .values_list("pk", flat=True)
        )
        stored = [item for item in items if item.turn.pk in present]
        citations_store_pages_for_turns([(item.turn.pk, item.cited) for item in stored])
        for item in stored:
            item.turn.answer_html = item.html
        update_rows([item.turn for item in stored], ["answer_html"])
    return [item if item.turn.pk in present else None for item in items]


async def _hand_back(stored: list[_Checked | None]) -> None:
    """Give the stored turns to whoever started their checks, together: what it does with
    them (cards to send) is its own."""
    by_callback: dict[OnChecked, list[Turn]] = {}
    for item in stored:
        if item is not None and item.on_checked is not None:
            by_callback.setdefault(item.on_checked, []).append(item.turn)
    for on_checked, turns in by_callback.items():
        try:
            await on_checked(turns)
        except Exception:  # the results are stored: pages that sync show them
            logger.exception("Handing back %d checked turns failed", len(turns))


# Checks whose pages were read together are stored in one trip, and handed back together.
get_checked_batches = PerLoop(
    lambda: DatabaseBatches(
        _store_checked_many, name="checked pages", then=_hand_back, background=True
    )
)
