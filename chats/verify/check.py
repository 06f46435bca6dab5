"""Check a finished answer's claims against the pages it cites, after the answer is shown.

A turn that cites web pages without passages finishes with those pages marked as being read
(`citations.pages.with_pending_pages`: its summary says "Checking 3 sources…"). Its run then
starts `check_turn_sources` as a task of the process: the pages come from the cache
(`citations.SourcePage`, fresh for SOURCE_FETCH_MAX_AGE_HOURS) or are fetched
(`chats.verify.fetch`), the best passage of each page is chosen for each claim and the figures
checked again (`citations.pages.with_pages`), the references and the cited HTML are stored, and
the turn is handed back to the run, which sends its pages the new card (a `turn.checked` frame).

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
from datetime import timedelta

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from chats.loop.per_loop import PerLoop
from chats.models import Turn
from chats.verify.fetch import FetchedPage, PageFetcher
from citations.models import SourcePage
from citations.pages import with_pages
from citations.references import PageRead
from citations.render_html import render_html
from citations.resolve import CitedAnswer
from citations.selectors import cited_answer_for_turn, source_pages_fresh
from citations.services import citations_store_pages, source_page_save

logger = logging.getLogger(__name__)

# Told of each turn whose pages were read (or given up on) and stored: the run announces its card.
OnChecked = Callable[[Turn], Awaitable[None]]

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


def start_source_checks(turn_ids: Iterable[int], on_checked: OnChecked) -> None:
    """Check each turn's cited pages in the background; once its reads are stored, the turn
    goes to `on_checked`."""
    checks = _checks()
    for turn_id in turn_ids:
        check = _check_safely(turn_id, on_checked)
        task = asyncio.create_task(check, name=f"source-check-{turn_id}")
        checks.tasks.add(task)
        task.add_done_callback(checks.tasks.discard)


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


async def _check_safely(turn_id: int, on_checked: OnChecked) -> None:
    try:
        turn = await check_turn_sources(turn_id)
    except Turn.DoesNotExist:
        return  # deleted (with its chat) while its pages were read: nothing to record
    except asyncio.CancelledError:
        # A turn must not say "Checking 3 sources…" for ever: its pages count as unread.
        await _store_unread(turn_id, "the server restarted before it was read", on_checked)
        raise
    except Exception:
        logger.exception("Checking the cited pages of turn %s failed", turn_id)
        await _store_unread(turn_id, "the check failed on our side", on_checked)
        return
    if turn is not None:
        await _hand_back(turn, on_checked)


async def _store_unread(turn_id: int, problem: str, on_checked: OnChecked) -> None:
    try:
        turn, cited = await database_sync_to_async(_turn_and_answer)(turn_id)
        reads = {
            key: PageRead(url=read.url, problem=problem)
            for key, read in cited.pages.items()
            if read.pending
        }
        if not reads:
            return
        await database_sync_to_async(_store_checked)(turn, cited, reads)
    except Exception:
        logger.exception("Recording the unread pages of turn %s failed", turn_id)
        return
    await _hand_back(turn, on_checked)


async def _hand_back(turn: Turn, on_checked: OnChecked) -> None:
    """Give the stored turn to the run; what it does with it (a card to send) is its own."""
    try:
        await on_checked(turn)
    except Exception:  # the result is stored: pages that sync show it
        logger.exception("Handing back the checked turn %s failed", turn.pk)


async def check_turn_sources(turn_id: int) -> Turn | None:
    """Read the turn's pending pages, check its claims against them and store the result;
    return the turn with its new cited HTML, or None if no page was pending."""
    turn, cited = await database_sync_to_async(_turn_and_answer)(turn_id)
    pending = {key: read.url for key, read in cited.pages.items() if read.pending}
    if not pending:
        return None
    limit = settings.SOURCE_FETCH_MAX_PAGES_PER_TURN
    order = {source.key: source.number for source in cited.sources}
    keys = sorted(pending, key=lambda key: order.get(key, len(order)))
    urls = list(dict.fromkeys(pending[key] for key in keys))
    wanted, over = urls[:limit], set(urls[limit:])
    pages = await _pages(wanted, user=turn.chat.owner_id)
    reads = {
        key: PageRead(url=url, problem=f"over the limit of {limit} pages a turn")
        if url in over
        else _page_read(pages[url])
        for key, url in pending.items()
    }
    await database_sync_to_async(_store_checked)(turn, cited, reads)
    return turn


def _turn_and_answer(turn_id: int) -> tuple[Turn, CitedAnswer]:
    turn = Turn.objects.select_related("chat").get(pk=turn_id)
    return turn, cited_answer_for_turn(turn)


async def _pages(urls: list[str], *, user: object) -> dict[str, SourcePage]:
    """Each URL's page: from the cache when fresh, else fetched now (once per URL per loop, in
    `user`'s share of the fetch slots)."""
    max_age = timedelta(hours=settings.SOURCE_FETCH_MAX_AGE_HOURS)
    pages = await database_sync_to_async(source_pages_fresh)(urls=urls, max_age=max_age)
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


def _store_checked(turn: Turn, cited: CitedAnswer, reads: dict[str, PageRead]) -> None:
    """Store the checked claims and the new cited HTML (on `turn` too)."""
    checked = with_pages(cited, reads)
    turn.answer_html = render_html(checked, doc_id=f"t{turn.pk}")
    with transaction.atomic():
        citations_store_pages(turn_id=turn.pk, cited=checked)
        Turn.objects.filter(pk=turn.pk).update(answer_html=turn.answer_html)
