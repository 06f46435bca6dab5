"""Search a user's past chats: one document per chat, full-text indexed by the database.

PostgreSQL: a tsvector column (title weighted A, the rest B) with a GIN index, queried through
`django.contrib.postgres.search`. SQLite: an FTS5 table over the same documents (Porter
stemming, bm25 ranking), kept in sync by triggers. Both take the same query: every word must
match, stemmed, and the last also as a prefix so results appear while typing.

`chat_search_index_update` must run whenever what a chat's document holds changes: a turn
finishes (`chats.run.finishes.finish_turn`, or for a run `SearchIndexQueue`), the chat is
renamed. A document keeps its chat's `updated_at` as read; a chat updated since (a process
died with the chat in its queue, or a batch failed) is found by the queue's catch-up passes:
at start-up and every CATCH_UP_EVERY while serving (`chats_due_for_search`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape

from channels.db import database_sync_to_async
from django.apps import apps as installed_apps
from django.contrib.postgres.search import SearchHeadline, SearchQuery, SearchRank, SearchVector
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q, Value
from django.db.models.functions import Greatest, Lower, Replace, StrIndex, Substr
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from chats.log_context import shared_task
from chats.loop.batches import DATABASE_FAILING
from chats.loop.per_loop import PerLoop
from chats.models import Chat, ChatSearchDocument, TeamChatShare, Turn

logger = logging.getLogger(__name__)

SEARCH_CONFIG = "english"  # PostgreSQL's stemmer; SQLite's FTS5 table uses `porter`
RESULT_LIMIT = 20
# Only the newest RANK_WINDOW chats that match are ranked: a word found in most chats then costs
# no more than one found in a few. Older matches show for queries specific enough to find them.
RANK_WINDOW = 200
HEADLINE_CONTEXT_CHARS = 400
MAX_QUERY_TERMS = 12
# PostgreSQL refuses a tsvector over 1 MB; a chat's first 200,000 characters are plenty to find it.
MAX_BODY_CHARS = 200_000
# Start-up looks for chats whose documents fell behind among those updated this recently: a
# process that died longer ago than that is `manage.py rebuild_search_index`'s to mend.
CATCH_UP_WINDOW = timedelta(days=7)
# While serving, the queue looks again this often, over the chats changed since its last look,
# and retries the chats whose batch failed (the database down for a moment): they are indexed
# minutes later, not at the next start.
CATCH_UP_EVERY = timedelta(minutes=5)
# Those passes leave alone chats changed this recently: their own process's queue has them.
CATCH_UP_SETTLE = timedelta(minutes=1)
# And look back this far before the previous pass's cut-off: a change stamped before it may
# have committed after it.
CATCH_UP_OVERLAP = timedelta(minutes=1)
INDEX_BATCH = 500  # chats per indexing transaction: on SQLite it holds the one write lock
ALONE_PROBE = 3  # chats tried alone after a refused batch before a fault common to all is assumed
# Shutdown indexes what is due for at most this long; what is left, the next start-up finds.
DRAIN_SECONDS = 10.0
# Snippets come back from the database as plain text with these around each match: the text is
# escaped first, then they become our own <mark> tags. Private-use characters, removed from
# documents, so stored text can never produce a tag.
_MARK_START, _MARK_END = "\ue000", "\ue001"
_TERM = re.compile(r"[^\W_]+")
_MARKDOWN_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MARKDOWN_LINE_MARK = re.compile(r"^\s*(?:>+|[-+])\s+", re.MULTILINE)  # quote, bullet
_MARKDOWN_RULE = re.compile(r"-{3,}")
_MARKDOWN_PUNCTUATION = re.compile(r"[*_`#|~]+")


@dataclass(frozen=True)
class ChatSearchResult:
    chat: Chat
    title_html: SafeString
    snippet_html: SafeString
    # A chat another user shared with the searcher's teams: those teams' names.
    team_names: tuple[str, ...] = ()


def chat_search_index_update(*, chat_id: int) -> None:
    """Rewrite the chat's search document from its title, turns and cited sources."""
    _index_chats([chat_id], apps=installed_apps)


class SearchIndexQueue:
    """Chats whose documents are due, indexed together a moment later, off the answers' path.

    Two hundred answers finishing at once are one indexing pass after their pages have them,
    rather than two hundred passes in the way of their final frames. Fresh answers
    go first; chats a catch-up pass found behind follow, newest first.
    """

    def __init__(self, delay: float = 0.25) -> None:
        self.delay = delay
        self._fresh: dict[int, None] = {}  # an ordered set: finished answers, as they came
        self._behind: dict[int, None] = {}  # found by catch-up passes, newest first
        self._failed: set[int] = set()  # retried by the next catch-up pass
        self._task: asyncio.Task | None = None
        self._catching_up: asyncio.Task | None = None
        self._stopping = asyncio.Event()
        self._caught_up_to: datetime | None = None  # None: the next pass takes the whole window
        self._stop_at = math.inf  # loop time after which no new batch starts (shutdown)

    def add(self, chat_id: int) -> None:
        self.add_many([chat_id])

    def add_many(self, chat_ids: list[int]) -> None:
        for chat_id in chat_ids:
            self._behind.pop(chat_id, None)
            self._failed.discard(chat_id)
            self._fresh[chat_id] = None
        self._start()

    def _add_behind(self, chat_ids: list[int]) -> None:
        """Queue `chat_ids` (newest first) ahead of the older backlog, behind fresh answers."""
        queued = [*chat_ids, *self._behind]
        self._behind = dict.fromkeys(i for i in queued if i not in self._fresh)
        self._start()

    def _start(self) -> None:
        if (self._fresh or self._behind) and (self._task is None or self._task.done()):
            self._task = shared_task(self._index_due(), name="search-index")

    def _next_batch(self) -> list[int]:
        batch: list[int] = []
        for due in (self._fresh, self._behind):
            while due and len(batch) < INDEX_BATCH:
                chat_id = next(iter(due))
                del due[chat_id]
                batch.append(chat_id)
        return batch

    async def _index_due(self) -> None:
        loop = asyncio.get_running_loop()
        while self._fresh or self._behind:
            await asyncio.sleep(self.delay)
            if loop.time() >= self._stop_at:
                return
            await self._index(self._next_batch())

    async def _index(self, chat_ids: list[int]) -> None:
        """Index the chats in one transaction. If the database refuses the batch for what it
        holds, each chat is tried alone, so that one chat it cannot take holds back no other
        (chats/loop/batches.py has the same rule); the chats that fail wait for the next pass."""
        try:
            await _index_chats_async(chat_ids)
        except Exception as error:
            logger.warning("Indexing %d chats for search failed", len(chat_ids), exc_info=error)
            if len(chat_ids) > 1 and not isinstance(error, DATABASE_FAILING):
                chat_ids = await self._index_one_by_one(chat_ids)
            self._failed.update(chat_ids)
        else:
            self._failed.difference_update(chat_ids)

    async def _index_one_by_one(self, chat_ids: list[int]) -> list[int]:
        """Index each chat in a transaction of its own; return those not indexed. Stops, the
        rest left untried, once the database itself fails, drain's time is up, or the first
        few chats all fail (then the fault is not in one chat)."""
        loop = asyncio.get_running_loop()
        failed: list[int] = []
        for tried, chat_id in enumerate(chat_ids):
            if loop.time() >= self._stop_at or (tried >= ALONE_PROBE and len(failed) == tried):
                return failed + chat_ids[tried:]
            try:
                await _index_chats_async([chat_id])
            except Exception as error:
                logger.error("Indexing chat %s for search failed", chat_id, exc_info=error)
                if isinstance(error, DATABASE_FAILING):
                    return failed + chat_ids[tried:]
                failed.append(chat_id)
        return failed

    async def catch_up(self, *, settle: timedelta = timedelta(0)) -> None:
        """Queue the chats whose documents fell behind, and retry alone those whose indexing
        failed. The first pass that succeeds looks at the chats updated within CATCH_UP_WINDOW
        (a process that died left them: at start-up nothing is in flight, so `settle` is 0);
        later ones at those updated since the previous cut-off, up to `settle` ago."""
        now = timezone.now()
        since = (self._caught_up_to or now - CATCH_UP_WINDOW) - CATCH_UP_OVERLAP
        until = now - settle
        due = await database_sync_to_async(chats_due_for_search)(since=since, until=until)
        self._caught_up_to = until
        failed, self._failed = self._failed, set()
        self._add_behind([chat_id for chat_id in due if chat_id not in failed])
        # Alone, not in a batch: a chat the database keeps refusing costs one transaction a
        # pass, and holds back no fresh answer.
        self._failed.update(await self._index_one_by_one(sorted(failed, reverse=True)))

    def keep_catching_up(self, every: timedelta = CATCH_UP_EVERY) -> None:
        """Run `catch_up` every `every` until `drain`, in the background."""
        if self._catching_up is None or self._catching_up.done():
            self._catching_up = shared_task(
                self._catch_up_forever(every.total_seconds()), name="search-catch-up"
            )

    async def _catch_up_forever(self, every: float) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), every)
            if self._stopping.is_set():  # drain: checked between passes, never mid-pass
                return
            try:
                await self.catch_up(settle=CATCH_UP_SETTLE)
            except Exception:  # the next pass starts where the last one that succeeded ended
                logger.exception("Looking for chats due for the search index failed")

    async def drain(self, within: float = DRAIN_SECONDS) -> None:
        """Index what is due now, fresh answers first, starting no batch after `within`
        seconds (the server's shutdown calls this). A pass or a batch under way is waited for,
        not cancelled: left on the database thread, it would outlive the connections."""
        self.delay = 0
        self._stop_at = asyncio.get_running_loop().time() + within
        self._stopping.set()
        if self._catching_up is not None:
            await asyncio.gather(self._catching_up, return_exceptions=True)
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)


get_search_index_queue = PerLoop(SearchIndexQueue)  # this event loop's queue


async def _index_chats_async(chat_ids: list[int]) -> None:
    await database_sync_to_async(_index_chats)(chat_ids, apps=installed_apps)


def chats_due_for_search(*, since: datetime, until: datetime | None = None) -> list[int]:
    """The chats updated (or renamed) since their documents were written, or never indexed,
    among those updated from `since` (to `until`), newest first; not those streaming a turn,
    which their run's finish queues. The search queue's catch-up passes queue them."""
    # The document's title is the chat's without the snippet marks (`_clean`).
    title = Replace(Replace(F("title"), Value(_MARK_START)), Value(_MARK_END))
    current = Q(search_document__chat_updated_at=F("updated_at"), search_document__title=title)
    streaming = Turn.objects.streaming().filter(chat=OuterRef("pk"))
    updated = Chat.objects.filter(updated_at__gte=since)
    if until is not None:
        updated = updated.filter(updated_at__lt=until)
    due = updated.exclude(current).exclude(Exists(streaming))
    return list(due.order_by("-updated_at", "-pk").values_list("pk", flat=True))


def chat_search_index_rebuild(*, apps=installed_apps, batch_size: int = INDEX_BATCH) -> int:
    """Rebuild every chat's search document; return how many chats were indexed.

    `apps` lets migration 0006_library build the index with its historical models.
    """
    chat_model = apps.get_model("chats", "Chat")
    chat_ids = list(chat_model.objects.order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(chat_ids), batch_size):
        _index_chats(chat_ids[start : start + batch_size], apps=apps)
    return len(chat_ids)


def _index_chats(chat_ids: list[int], *, apps) -> None:
    chat_model = apps.get_model("chats", "Chat")
    document_model = apps.get_model("chats", "ChatSearchDocument")
    stamped = _has_field(document_model, "chat_updated_at")  # not in migration 0006's model
    # Read and built before the transaction, as a finish renders its answers before its own
    # (services.turn_finish_many): on SQLite a transaction holds the one write lock, and the
    # event log's writer waits for it in SQLite's busy handler, which sleeps 1, 2, 5 ms and
    # more between tries, so a 3 ms hold cost it 8.4 ms (docs/PERFORMANCE.md, "The search
    # index reads before it takes the write lock"). What changes meanwhile is checked under the
    # lock, below.
    texts = _document_texts(chat_ids, apps=apps)
    if not texts:
        return
    with transaction.atomic():
        # A chat renamed or deleted since it was read is left out: its rename indexes it, and a
        # deleted chat has no document to write. The write lock (SQLite) or the rows' locks,
        # taken in id order as a finish takes them (PostgreSQL), keep each title as read here
        # until the documents are written. A turn that commits meanwhile is caught by the
        # stamp: the chat's updated_at is newer than the document's, so the chat is due again.
        rows = (
            chat_model.objects.select_for_update(no_key=True)
            .filter(pk__in=list(texts))
            .order_by("pk")
            .values_list("pk", "title")
        )
        titles = {chat_id: _clean(title) for chat_id, title in rows}
        documents = [
            document_model(
                chat_id=chat_id,
                title=title,
                body=body,
                **({"chat_updated_at": updated_at} if stamped else {}),
            )
            for chat_id, (title, body, updated_at) in texts.items()
            if titles.get(chat_id) == title
        ]
        # An upsert: two processes indexing a chat that has no document yet must not fail each
        # other's batch on the unique chat.
        document_model.objects.bulk_create(
            documents,
            update_conflicts=True,
            unique_fields=["chat"],
            update_fields=["title", "body", *(["chat_updated_at"] if stamped else [])],
        )
        if connection.vendor == "postgresql":
            document_model.objects.filter(chat_id__in=[d.chat_id for d in documents]).update(
                search_vector=SearchVector("title", weight="A", config=SEARCH_CONFIG)
                + SearchVector("body", weight="B", config=SEARCH_CONFIG)
            )


def _has_field(model, name: str) -> bool:
    """Migration 0006 indexes with the model as it was then, before `chat_updated_at`."""
    return any(field.name == name for field in model._meta.get_fields())


def _document_texts(chat_ids: list[int], *, apps) -> dict[int, tuple[str, str, datetime]]:
    """Return (title, body, the chat's updated_at) by chat id: questions and answers in order,
    then source names. The chat row is read first: a turn that commits after it leaves the
    chat's updated_at newer than the one returned, so the chat is due again."""
    chat_model = apps.get_model("chats", "Chat")
    turn_model = apps.get_model("chats", "Turn")
    reference_model = apps.get_model("citations", "Reference")
    rows = chat_model.objects.filter(pk__in=chat_ids).values_list("pk", "title", "updated_at")
    chats = {chat_id: (title, updated_at) for chat_id, title, updated_at in rows}
    parts: dict[int, list[str]] = {chat_id: [] for chat_id in chats}
    turns = (
        turn_model.objects.filter(chat_id__in=chats)
        .order_by("chat_id", "created_at", "pk")
        .values_list("chat_id", "question", "answer_text")
    )
    for chat_id, question, answer in turns:
        parts[chat_id] += [question, _markdown_as_text(answer)]
    sources = (
        reference_model.objects.filter(turn__chat_id__in=chats, source__isnull=False)
        .order_by("turn__chat_id", "source__label")
        .values_list("turn__chat_id", "source__name", "source__headline")
        .distinct()
    )
    for chat_id, name, headline in sources:
        parts[chat_id] += [name, headline]
    return {
        chat_id: (
            _clean(title),
            _clean("\n".join(p for p in parts[chat_id] if p))[:MAX_BODY_CHARS],
            updated_at,
        )
        for chat_id, (title, updated_at) in chats.items()
    }


def _markdown_as_text(markdown: str) -> str:
    """Return Markdown without its punctuation, close enough to the shown text for snippets.

    One pattern per kind of noise, the links' and the rules' only where their text occurs: one
    regex of all of them, with a line start among its alternatives, was tried at every
    character, 0.13 ms for a 3 KB answer at every finish (docs/PERFORMANCE.md, "Text
    passes without a regex tried at every character"). The words are that regex's; only the spacing
    can differ.
    """
    text = _MARKDOWN_LINK.sub(r"\1", markdown) if "](" in markdown else markdown
    text = _MARKDOWN_LINE_MARK.sub(" ", text)
    if "---" in text:
        text = _MARKDOWN_RULE.sub(" ", text)
    return _MARKDOWN_PUNCTUATION.sub(" ", text)


def _clean(text: str) -> str:
    return text.replace(_MARK_START, "").replace(_MARK_END, "")


def chat_search_for_user(*, user, query: str, limit: int = RESULT_LIMIT) -> list[ChatSearchResult]:
    """Return the chats the user may read (theirs, and those shared with their teams: the
    rule of `ChatQuerySet.readable_by`) matching every word of `query`, best first, with
    snippets; a team's chat says which teams."""
    terms = _TERM.findall(query.lower())[:MAX_QUERY_TERMS]
    if not terms or not user.is_authenticated:
        return []
    if connection.vendor == "postgresql":
        with transaction.atomic(), connection.cursor() as cursor:
            # PostgreSQL's cost model ignores that each row's tsvector is TOASTed: it then
            # prefers a sequential scan that reads every document over the GIN index (825 ms
            # against 0.2 ms for a word in no chat, 10,000 chats). This transaction only.
            cursor.execute("SET LOCAL enable_seqscan = off")
            rows = _search_postgresql(user_id=user.pk, terms=terms, limit=limit)
    else:
        rows = _search_sqlite(user_id=user.pk, terms=terms, limit=limit)
    chats = Chat.objects.in_bulk([chat_id for chat_id, _, _ in rows])
    teams = _team_names(user=user, chat_ids=[c.pk for c in chats.values() if c.owner_id != user.pk])
    return [
        ChatSearchResult(
            chats[chat_id], _marked_html(title), _marked_html(snippet), teams.get(chat_id, ())
        )
        for chat_id, title, snippet in rows
        if chat_id in chats
    ]


def _team_names(*, user, chat_ids: list[int]) -> dict[int, tuple[str, ...]]:
    """The teams of the user's that each of these chats is shared with."""
    if not chat_ids:
        return {}
    shares = TeamChatShare.objects.filter(chat_id__in=chat_ids, team__memberships__user=user)
    names: dict[int, tuple[str, ...]] = {}
    for chat_id, name in shares.order_by("team__name").values_list("chat_id", "team__name"):
        names[chat_id] = (*names.get(chat_id, ()), name)
    return names


def _search_postgresql(*, user_id: int, terms: list[str], limit: int) -> list[tuple]:
    # Terms are letters and digits only, so this raw tsquery cannot be malformed.
    tsquery = " & ".join([*terms[:-1], f"{terms[-1]}:*"])
    query = SearchQuery(tsquery, search_type="raw", config=SEARCH_CONFIG)
    readable = Chat.objects.readable_by(user_id).values("pk")
    matches = ChatSearchDocument.objects.filter(chat_id__in=readable, search_vector=query)
    # Ordered by an expression, not the chat_id index: walking that index backwards would test
    # every document against the query (reading each tsvector) instead of asking the GIN index.
    newest = matches.order_by((F("chat_id") + 0).desc()).values_list("chat_id", flat=True)
    window = list(newest[:RANK_WINDOW])
    best = list(  # ranked by chat id: each tsvector is read once, for ts_rank
        ChatSearchDocument.objects.filter(chat_id__in=window)
        .annotate(rank=SearchRank(F("search_vector"), query))
        .order_by("-rank", "chat_id")  # ties as FTS5 leaves them: oldest first
        .values_list("pk", flat=True)[:limit]
    )
    if not best:
        return []
    # Headlines only for the page of results, and each over the stretch of the body around the
    # longest word's first stem: ts_headline parses all the text it is given (~7 ms for 9 KB).
    marks = {"start_sel": _MARK_START, "stop_sel": _MARK_END, "config": SEARCH_CONFIG}
    start = StrIndex(Lower("body"), Value(_postgresql_stem(max(terms, key=len))))
    excerpt = Substr(
        "body", Greatest(start - HEADLINE_CONTEXT_CHARS, 1), 3 * HEADLINE_CONTEXT_CHARS
    )
    snippets = (
        ChatSearchDocument.objects.filter(pk__in=best)
        .annotate(
            title_marked=SearchHeadline("title", query, highlight_all=True, **marks),
            body_marked=SearchHeadline(
                excerpt, query, max_words=30, min_words=12, max_fragments=2, **marks
            ),
        )
        .values_list("pk", "chat_id", "title_marked", "body_marked")
    )
    by_pk = {pk: (chat_id, title, body) for pk, chat_id, title, body in snippets}
    return [by_pk[pk] for pk in best if pk in by_pk]


def _postgresql_stem(term: str) -> str:
    """Return the term as the search configuration stems it ("improving" -> "improv")."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT array_to_string(tsvector_to_array(to_tsvector(%s::regconfig, %s)), ' ')",
            [SEARCH_CONFIG, term],
        )
        return cursor.fetchone()[0] or term  # a stop word has no stem


# The FTS5 table is the one migration 0006_library made (its rowid is the chat's id); the
# user's words travel as parameters. A chat is the user's, or shared with a team of theirs
# (`ChatQuerySet.readable_by`, written here in SQL).
_SQLITE_READABLE = (
    "(c.owner_id = %s OR c.id IN (SELECT s.chat_id FROM chats_teamchatshare s"
    " JOIN chats_teammembership m ON m.team_id = s.team_id WHERE m.user_id = %s))"
)
# Ordered by FTS5's own `rank` column, FTS5 sorts the matches itself and SQLite stops after LIMIT
# rows, so snippets are made for the page of results only.
_SQLITE_WINDOW_START = (  # constants only: the words are parameters
    "SELECT f.rowid FROM chats_chatsearchdocument_fts f JOIN chats_chat c ON c.id = f.rowid"  # noqa: S608
    f" WHERE chats_chatsearchdocument_fts MATCH %s AND {_SQLITE_READABLE}"
    " ORDER BY f.rowid DESC LIMIT 1 OFFSET %s"
)
_SQLITE_SEARCH = (
    "SELECT f.rowid, highlight(chats_chatsearchdocument_fts, 0, %s, %s),"  # noqa: S608
    " snippet(chats_chatsearchdocument_fts, 1, %s, %s, '…', 24)"
    " FROM chats_chatsearchdocument_fts f JOIN chats_chat c ON c.id = f.rowid"
    " WHERE chats_chatsearchdocument_fts MATCH %s AND f.rank MATCH 'bm25(10.0, 1.0)'"
    f" AND {_SQLITE_READABLE} AND f.rowid >= %s ORDER BY f.rank LIMIT %s"
)


def _search_sqlite(*, user_id: int, terms: list[str], limit: int) -> list[tuple]:
    # Each term quoted as an FTS5 string (letters and digits only); adjacent strings are ANDed.
    match = " ".join([*(f'"{t}"' for t in terms[:-1]), f'"{terms[-1]}"*'])
    marks = [_MARK_START, _MARK_END, _MARK_START, _MARK_END]
    with connection.cursor() as cursor:
        cursor.execute(_SQLITE_WINDOW_START, [match, user_id, user_id, RANK_WINDOW - 1])
        oldest = (cursor.fetchone() or [0])[0]
        cursor.execute(_SQLITE_SEARCH, [*marks, match, user_id, user_id, oldest, limit])
        return cursor.fetchall()


def _marked_html(text: str) -> SafeString:
    """Escape the database's snippet, then turn its match sentinels into <mark> tags."""
    html = escape(text or "").replace(_MARK_START, "<mark>").replace(_MARK_END, "</mark>")
    return mark_safe(html)  # escaped above: only our own tags
