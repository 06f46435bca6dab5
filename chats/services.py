"""Writes: start a turn, store how it finished (rendered by `chats.run.rendering`), fail one that
cannot be stored, choose a branch."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chats.agent.options import QuestionOptions, request_fields
from chats.agent.providers import BIGDATA, agent_choices, default_agent
from chats.agent.request import AgentRequest, ConversationTurn, Workflow
from chats.agent.transcript import Transcript
from chats.answer import display
from chats.errors import ErrorCode, TurnStartError
from chats.locks import lock_users
from chats.models import LEAF, Chat, OutputSchema, Turn
from chats.row_updates import update_rows
from chats.selectors import (
    BranchTurn,
    Tree,
    branch_leaf,
    chat_branch,
    chat_turn_tree,
    chat_turn_trees,
    tree_versions,
)
from chats.usage.limits import usage_budgets
from chats.usage.records import usage_record_for_turns
from chats.webhooks.services import webhooks_turns_finished
from citations.resolve import CitedAnswer
from citations.services import citations_store_for_turns

logger = logging.getLogger(__name__)

INITIAL_CHECKPOINT = "INITIAL"  # docs/PROTOCOL.md: restarts an upstream chat


def chat_create(*, owner, provider: str = "") -> Chat:
    """Create a chat answered by `provider` (an offered agent), else by the default agent."""
    offered = dict(agent_choices())
    return Chat.objects.create(
        owner=owner, provider=provider if provider in offered else default_agent()
    )


@dataclass(frozen=True)
class StartedTurn:
    """A turn `turn_start` created, the request that asks the agent for it, and its siblings."""

    turn: Turn
    request: AgentRequest
    siblings: list[int]  # the ids of the turns under the same parent, this one last

    @property
    def card_item(self) -> BranchTurn:
        """What the turn's card renders: known here, so the card costs no query."""
        return BranchTurn.among(self.turn, self.siblings)


@dataclass(frozen=True)
class TurnAsk:
    """One question to start a turn for, as the page asked it.

    A `chat` not saved yet (no `pk`) asks for a new chat: its owner's, answered by its agent,
    created with its first turn once the ask passes the checks. A `workflow` runs instead of a
    question (the Research Agent's Workflows, always in a new chat); `question` is its title.
    """

    chat: Chat
    question: str
    research_effort: str
    parent_turn_id: int | str | None = LEAF
    restart: bool = False
    options: QuestionOptions | None = None  # None: the chat's saved options
    save_options: bool = True  # False: a re-run, which leaves the composer's options alone
    workflow: Workflow | None = None


def turn_start(
    *,
    chat: Chat,
    question: str,
    research_effort: str,
    parent_turn_id: int | str | None = LEAF,
    restart: bool = False,
    options: QuestionOptions | None = None,
) -> StartedTurn:
    """Start one turn (see `turn_start_many`); raise TurnStartError when it is refused."""
    ask = TurnAsk(chat, question, research_effort, parent_turn_id, restart, options)
    (started,) = turn_start_many([ask])
    if isinstance(started, TurnStartError):
        raise started
    return started


@transaction.atomic
def turn_start_many(asks: list[TurnAsk]) -> list[StartedTurn | TurnStartError]:
    """Create a streaming turn per ask, and the request that continues its branch upstream.

    One transaction and a fixed number of queries for the whole list (and one more query for
    each ask that names a saved output schema): a burst of asks (every
    page of a team asking at once) costs a few round trips, not a few per ask. Returns, in the
    order of `asks`, the started turn or why that ask was refused; one refusal costs the others
    nothing.

    The options an ask carries are saved on its chat; None uses the chat's. An ask for a new
    chat (see `TurnAsk`) creates it here, in the same transaction, after the same checks.

    A follow-up continues from the checkpoint of the last completed turn on its branch; a turn
    at the start of a chat continued from a team's answer ("Continue in my chats") from that
    answer's checkpoint, or its branch for other agents; a turn at the start of an existing
    conversation (an edited first question) branches from INITIAL;
    a restart begins a fresh upstream conversation while the local history stays.

    Refused while the chat already streams a turn, while the owner has
    AGENT_MAX_CONCURRENT_TURNS streaming anywhere, or when the owner's monthly usage limit would
    be passed (`chats.usage.limits`): each refusal costs no upstream request.
    """
    # Lock the owners, then the chats, each in id order, in every process: asks of one user are
    # counted one at a time, so twenty at once cannot all see room for one more, and no two
    # transactions can each hold a row the other waits for.
    owner_ids = sorted({ask.chat.owner_id for ask in asks})
    chat_ids = sorted({ask.chat.pk for ask in asks if ask.chat.pk is not None})
    lock_users(owner_ids)
    # FOR NO KEY UPDATE: nothing here changes a key, so foreign-key checks elsewhere (a turn's
    # events being logged, a chat's search document) need not wait for these locks.
    locked_chats = (
        Chat.objects.select_for_update(no_key=True).filter(pk__in=chat_ids).order_by("pk")
    )
    chats = {chat.pk: chat for chat in locked_chats}
    now = timezone.now()
    # A streaming turn whose lease lapsed belongs to a dead process; the sweeper finishes it.
    running = Turn.objects.streaming().filter(
        lease_expires_at__gt=now, chat__owner_id__in=owner_ids
    )
    here: Counter[int] = Counter()
    anywhere: Counter[int] = Counter()
    for chat_id, owner_id in running.values_list("chat_id", "chat__owner_id"):
        here[chat_id] += 1
        anywhere[owner_id] += 1
    trees = chat_turn_trees(chat_ids=chat_ids)
    budgets = usage_budgets(owner_ids=owner_ids, now=now)  # the monthly usage limits

    outcomes: list[_NewTurn | TurnStartError] = []
    for ask in asks:
        new_chat = ask.chat.pk is None
        chat = ask.chat if new_chat else chats.get(ask.chat.pk)
        try:
            if chat is None:  # deleted since the page opened it
                raise TurnStartError("This chat is not available.", ErrorCode.NOT_FOUND)
            if ask.workflow is not None and not (new_chat and chat.provider == BIGDATA):
                raise TurnStartError("A workflow runs in a new chat with the Research Agent.")
            if not new_chat and here[chat.pk]:
                raise TurnStartError(
                    "This chat is still answering. Wait for it to finish or stop it first.",
                    ErrorCode.TURN_IN_PROGRESS,
                )
            if anywhere[chat.owner_id] >= settings.AGENT_MAX_CONCURRENT_TURNS:
                raise TurnStartError(
                    f"You already have {settings.AGENT_MAX_CONCURRENT_TURNS} answers being"
                    " written. Ask again when one of them has finished.",
                    ErrorCode.TOO_MANY_TURNS,
                )
            new = _new_turn(ask, chat, trees.get(chat.pk, {}), now)
            budgets.admit(owner_id=chat.owner_id, agent=chat.provider)
        except TurnStartError as refused:
            outcomes.append(refused)
            continue
        if not new_chat:
            here[chat.pk] += 1
        anywhere[chat.owner_id] += 1
        outcomes.append(new)

    created = [o for o in outcomes if isinstance(o, _NewTurn)]
    for new in created:
        if new.turn.chat.pk is None:
            new.turn.chat.save()  # its turn takes its id as it is inserted
    Turn.objects.bulk_create([new.turn for new in created])
    for new in created:
        chat = new.turn.chat
        chat.active_turn = new.turn
        chat.updated_at = now
        if not chat.title:
            chat.title = display.chat_title(new.turn.question)
        if new.save_options:
            chat.options = new.options.to_json()
    # One UPDATE for the chats' rows (locked already, in id order), as for one chat.
    chats_changed = {new.turn.chat_id: new.turn.chat for new in created}
    update_rows(list(chats_changed.values()), ["active_turn", "updated_at", "title", "options"])
    return [o if isinstance(o, TurnStartError) else o.started() for o in outcomes]


@dataclass
class _NewTurn:
    """A turn about to be created, with what its request is built from once it has an id."""

    turn: Turn
    options: QuestionOptions
    schema: dict | None
    history: tuple[ConversationTurn, ...]
    siblings: list[int]
    save_options: bool = True
    workflow: Workflow | None = None

    def started(self) -> StartedTurn:
        turn = self.turn
        if self.workflow is not None:
            request = AgentRequest(
                message=turn.question,
                research_effort=turn.research_effort,
                workflow=self.workflow,
            )
        elif turn.chat.provider == BIGDATA:
            request = AgentRequest(
                message=turn.question,
                research_effort=turn.research_effort,
                chat_id=turn.upstream_chat_id or None,
                from_checkpoint_id=turn.from_checkpoint_id or None,
                persistence_mode=settings.AGENT_PERSISTENCE_MODE,
                **request_fields(self.options, self.schema),
            )
        else:
            # Agents without server-side checkpoints are sent the branch itself, so "Continue
            # from here", "Edit" and follow-ups mean the same as with the Research Agent.
            request = AgentRequest(
                message=turn.question, history=self.history, research_effort=turn.research_effort
            )
        return StartedTurn(turn, request, [*self.siblings, turn.pk])


def _new_turn(ask: TurnAsk, chat: Chat, tree: Tree, now: datetime) -> _NewTurn:
    """Place the ask's turn in its chat's tree and find what continues it upstream."""
    by_id = {t.pk: t for children in tree.values() for t in children}
    if ask.parent_turn_id == LEAF:
        branch = chat_branch(chat=chat, tree=tree)
        parent = branch[-1].turn if branch else None
    elif ask.parent_turn_id is None:
        parent = None
    else:
        parent = by_id.get(ask.parent_turn_id)
        if parent is None:
            raise TurnStartError("That turn is not in this chat.")

    upstream_chat_id, from_checkpoint = "", ""
    if chat.provider == BIGDATA and not ask.restart:
        anchor = parent
        while anchor is not None and not (
            anchor.status == Turn.Status.COMPLETE and anchor.checkpoint_id
        ):
            anchor = by_id.get(anchor.parent_id)
        if anchor is not None:
            upstream_chat_id = anchor.upstream_chat_id or chat.upstream_chat_id
            from_checkpoint = anchor.checkpoint_id
        elif (origin := _continued_from(chat)) is not None and origin.checkpoint_id:
            upstream_chat_id = origin.upstream_chat_id or origin.chat.upstream_chat_id
            from_checkpoint = origin.checkpoint_id
        elif chat.upstream_chat_id:
            upstream_chat_id, from_checkpoint = chat.upstream_chat_id, INITIAL_CHECKPOINT

    options = ask.options if ask.options is not None else QuestionOptions.from_stored(chat.options)
    schema = None
    if options.schema_id is not None:
        saved = OutputSchema.objects.filter(pk=options.schema_id, owner_id=chat.owner_id).first()
        if saved is None:
            raise TurnStartError("The structured output schema chosen in Options no longer exists.")
        schema = saved.schema

    turn = Turn(
        chat=chat,
        parent=parent,
        question=ask.question,
        research_effort=ask.research_effort,
        upstream_chat_id=upstream_chat_id,
        from_checkpoint_id=from_checkpoint,
        is_restart=ask.restart,
        created_at=now,
        lease_expires_at=now + timedelta(seconds=settings.TURN_LEASE_SECONDS),
        options=options.to_json(),
        workflow=asdict(ask.workflow) if ask.workflow is not None else None,
    )
    history = () if ask.restart else branch_history(parent=parent, by_id=by_id)
    if not ask.restart and chat.continued_from_id and chat.provider != BIGDATA:
        history = _continued_history(chat) + history
    siblings = [version.pk for version in tree_versions(tree, turn)]
    return _NewTurn(turn, options, schema, history, siblings, ask.save_options, ask.workflow)


def branch_history(*, parent: Turn | None, by_id: dict[int, Turn]) -> tuple[ConversationTurn, ...]:
    """Return the completed questions and answers from the root of the branch to `parent`."""
    history = []
    turn = parent
    while turn is not None:
        if turn.status == Turn.Status.COMPLETE and turn.answer_text:
            history.append(ConversationTurn(question=turn.question, answer=turn.answer_text))
        turn = by_id.get(turn.parent_id)
    return tuple(reversed(history))


def _continued_from(chat: Chat) -> Turn | None:
    """The answer of another chat this one goes on from ("Continue in my chats"), if any."""
    if not chat.continued_from_id:
        return None
    return Turn.objects.select_related("chat").filter(pk=chat.continued_from_id).first()


def _continued_history(chat: Chat) -> tuple[ConversationTurn, ...]:
    """The branch this chat goes on from, up to that answer: sent before the chat's own turns
    to agents without server-side conversations."""
    origin = _continued_from(chat)
    if origin is None:  # its chat was deleted since
        return ()
    by_id = Turn.objects.filter(chat_id=origin.chat_id).in_bulk()
    return branch_history(parent=by_id.get(origin.pk), by_id=by_id)


@dataclass(frozen=True)
class TurnEnd:
    """How a turn's run ended: what `turn_finish_many` stores."""

    turn_id: int
    transcript: Transcript
    status: str
    # The answer rendered ahead, off the database thread: `chats.run.rendering.turn_end`.
    rendered: RenderedEnd
    error: str = ""
    error_kind: str = ""
    malformed_lines: int = 0
    sanitized_events: int = 0
    execution_id: str = ""  # a Workflows run's id, as its stream named it


@dataclass(frozen=True)
class RenderedEnd:
    """What finishing a turn computes before it touches the database, CPU work only
    (`chats.run.rendering`, the one place a finished answer is rendered)."""

    cited: CitedAnswer
    html: str
    charts: list[dict[str, Any]]


# The fields a finished turn takes as they are from how its run ended, and from its transcript.
_COPIED_FROM_END = ("status", "error", "error_kind", "malformed_lines", "sanitized_events")
_COPIED_FROM_TRANSCRIPT = ("checkpoint_id", "consumption", "plan", "structured_output")

# What finishing a turn changes on its row (`save(update_fields=...)`: the rest is left alone).
FINISHED_FIELDS = [
    *_COPIED_FROM_END,
    *_COPIED_FROM_TRANSCRIPT,
    "answer_text",
    "answer_html",
    "charts",
    "tool_error_count",
    "notices",
    "finished_at",
    "lease_expires_at",
    "upstream_chat_id",
    "execution_id",
]


def turn_finish_many(ends: list[TurnEnd]) -> list[Turn | None]:
    """Store the answers, citations and outcomes of turns that ended together, in one
    transaction and the queries of one.

    Returns, in the order of `ends`, each stored turn (its chat loaded), or None for a turn
    already finished (by a sweeper that thought its run dead) or gone.
    """
    # Citations, HTML and charts are rendered before (`TurnEnd.rendered`), outside the
    # transaction: on SQLite it holds the one write lock, which the event log's writer waits for.
    with transaction.atomic():
        return _store_ends(ends)


def _store_ends(ends: list[TurnEnd]) -> list[Turn | None]:
    turn_ids = [end.turn_id for end in ends]
    # Lock the chats, then the turns, each in id order, as starting a turn locks its chat: two
    # batches of either kind then never hold a row the other waits for.
    chat_ids = sorted(set(Turn.objects.filter(pk__in=turn_ids).values_list("chat_id", flat=True)))
    locked_chats = Chat.objects.select_for_update(no_key=True).filter(pk__in=chat_ids)
    chats = {chat.pk: chat for chat in locked_chats.order_by("pk")}
    locked = Turn.objects.select_for_update(no_key=True).filter(pk__in=turn_ids).order_by("pk")
    turns = {turn.pk: turn for turn in locked}
    finishing = []
    for end in ends:
        turn = turns.pop(end.turn_id, None)  # popped: a turn ended twice is stored once
        if turn is not None and not turn.is_finished:
            finishing.append((turn, end, end.rendered))
    # Only the transaction that finishes a turn stores its citations, and it is unfinished.
    citations_store_for_turns([(t.pk, r.cited) for t, _, r in finishing], replace_stored=False)
    now = timezone.now()
    changed_chats = {}
    for turn, end, rendered in finishing:
        transcript = end.transcript
        turn.chat = chat = chats[turn.chat_id]
        for name in _COPIED_FROM_END:
            setattr(turn, name, getattr(end, name))
        for name in _COPIED_FROM_TRANSCRIPT:
            setattr(turn, name, getattr(transcript, name))
        turn.answer_text = transcript.answer
        turn.answer_html = rendered.html
        turn.charts = rendered.charts
        turn.tool_error_count = transcript.tool_errors
        # An answer cut short keeps citations the agent made for the whole of it: those past
        # its end are said to be so, not called malformed.
        cut_short = end.status != Turn.Status.COMPLETE
        past_the_cut = len(rendered.cited.references_past_the_end) if cut_short else 0
        turn.notices = display.turn_notices(
            skipped=transcript.skipped,
            skipped_lines=transcript.skipped_lines,
            malformed_lines=end.malformed_lines,
            dropped_citations=len(rendered.cited.invalid_references) - past_the_cut,
            citations_past_the_cut=past_the_cut,
        )
        turn.finished_at = now
        turn.lease_expires_at = None
        if transcript.upstream_chat_id:
            turn.upstream_chat_id = transcript.upstream_chat_id
        turn.execution_id = end.execution_id or turn.execution_id
        chat.updated_at = now
        if transcript.upstream_chat_id and (turn.is_restart or not chat.upstream_chat_id):
            chat.upstream_chat_id = transcript.upstream_chat_id
        changed_chats[chat.pk] = chat
    # One statement for the turns' rows, one for their chats' (all locked already, in id order).
    update_rows([turn for turn, *_ in finishing], FINISHED_FIELDS)
    update_rows(list(changed_chats.values()), ["updated_at", "upstream_chat_id"])
    usage_record_for_turns(turns=[turn for turn, *_ in finishing], now=now)
    finished = {turn.pk: turn for turn, *_ in finishing}
    webhooks_turns_finished(turns=list(finished.values()))  # those the API asked it for
    return [finished.get(end.turn_id) for end in ends]


def turn_renew_leases(*, turn_ids: list[int]) -> None:
    expires = timezone.now() + timedelta(seconds=settings.TURN_LEASE_SECONDS)
    Turn.objects.filter(pk__in=turn_ids).streaming().update(lease_expires_at=expires)


def turn_fail_unsaved(*, turn_id: int, error: str) -> Turn | None:
    """Mark a streaming turn failed, writing only fields no answer can make unstorable.

    For a turn whose answer `turn_finish_many` could not store: it must not stay "streaming".
    Returns None when the turn was already finished.
    """
    with transaction.atomic():
        updated = (
            Turn.objects.filter(pk=turn_id)
            .streaming()
            .update(
                status=Turn.Status.FAILED,
                error=error,
                error_kind=Turn.ErrorKind.UNSAVED,
                finished_at=timezone.now(),
                lease_expires_at=None,
            )
        )
        turn = Turn.objects.select_related("chat").get(pk=turn_id) if updated else None
        if turn is not None:
            webhooks_turns_finished(turns=[turn])
    return turn


def chat_select_branch(*, chat: Chat, turn_id: int) -> None:
    """Show the branch through `turn_id`, down to its newest leaf."""
    tree = chat_turn_tree(chat=chat)
    turn = next((t for children in tree.values() for t in children if t.pk == turn_id), None)
    if turn is None:
        raise TurnStartError("That turn is not in this chat.")
    chat.active_turn = branch_leaf(tree, turn)
    chat.save(update_fields=["active_turn"])
