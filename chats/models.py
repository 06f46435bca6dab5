"""Chats, their turns (a question and its answer) and each turn's raw event log.

Turns form a tree through `parent`: a follow-up is a child of the turn it follows, an edit or a
retry is a sibling. `Chat.active_turn` is the leaf of the branch the user last looked at.
"""

from collections.abc import Iterable

from django.conf import settings
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models.functions import Now
from django.utils import timezone


class ChatQuerySet(models.QuerySet):
    """Who may see a chat, decided here and nowhere else: its owner writes to it (`for_user`);
    its owner and the members of every team it is shared with read it (`readable_by`)."""

    def for_user(self, user) -> "ChatQuerySet":
        return self.filter(owner=user)

    def readable_by(self, user) -> "ChatQuerySet":
        shared = TeamChatShare.objects.filter(team__memberships__user=user).values("chat_id")
        return self.filter(models.Q(owner=user) | models.Q(pk__in=shared))

    def readable_pairs(self, pairs: Iterable[tuple[int, int]]) -> dict[tuple[int, int], "Chat"]:
        """Of these (user id, chat id) pairs, those whose user may read the chat, each with its
        chat: `readable_by`'s rule for many readers at once (pages opening together), in one
        query, and a second for the chats not their reader's own."""
        wanted = set(pairs)
        chats = self.in_bulk({chat_id for _, chat_id in wanted})
        found = {pair: chats[pair[1]] for pair in wanted if pair[1] in chats}
        readable = {pair: chat for pair, chat in found.items() if chat.owner_id == pair[0]}
        if others := found.keys() - readable.keys():
            shares = TeamChatShare.objects.filter(
                chat_id__in={chat_id for _, chat_id in others},
                team__memberships__user_id__in={user_id for user_id, _ in others},
            ).values_list("team__memberships__user_id", "chat_id")
            readable.update((pair, found[pair]) for pair in others.intersection(shares))
        return readable


class Chat(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chats"
    )
    title = models.CharField(max_length=200, blank=True)
    # Which agent answers this chat (chats.agent.providers); fixed when the chat is created.
    provider = models.CharField(max_length=32, default="bigdata", db_index=True)
    # The agent's conversation id, from the event envelope of the latest upstream conversation.
    # Text, not a capped CharField: ids are the API's to choose, and one that did not fit left
    # its turn unsaveable.
    upstream_chat_id = models.TextField(blank=True)
    active_turn = models.ForeignKey(
        "Turn", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(default=timezone.now, db_index=True)
    # The library (chats/library/): pinned chats head the sidebar; archived ones leave it.
    pinned = models.BooleanField(default=False)
    archived_at = models.DateTimeField(null=True, blank=True)
    # The composer's question options, remembered per chat (chats/agent/options.py, `to_json`).
    options = models.JSONField(default=dict, blank=True)
    # "Continue in my chats": the answer of a chat shared with a team that this chat goes on
    # from. Its first question is sent with that answer's checkpoint (the Research Agent) or
    # that answer's branch (other agents); the chat it came from is left as it was.
    continued_from = models.ForeignKey(
        "Turn", on_delete=models.SET_NULL, null=True, blank=True, related_name="continuations"
    )

    objects = ChatQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at", "-id"]

    def __str__(self) -> str:
        return self.title or f"Chat {self.pk}"


class TurnQuerySet(models.QuerySet):
    def streaming(self) -> "TurnQuerySet":
        return self.filter(status=Turn.Status.STREAMING)

    def orphaned(self, now=None) -> "TurnQuerySet":
        """Streaming turns whose run stopped renewing its lease (the process died)."""
        now = now or timezone.now()
        return self.streaming().filter(
            models.Q(lease_expires_at__lt=now) | models.Q(lease_expires_at__isnull=True)
        )


# The `parent_turn_id` of an ask that continues the chat's visible branch, wherever its leaf is.
LEAF = "leaf"


class Turn(models.Model):
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="turns")
    parent = models.ForeignKey(
        "self", on_delete=models.CASCADE, null=True, blank=True, related_name="children"
    )
    question = models.TextField()

    class Effort(models.TextChoices):
        LITE = "lite"
        STANDARD = "standard"

    research_effort = models.CharField(
        max_length=16, choices=Effort.choices, default=Effort.STANDARD
    )

    class Status(models.TextChoices):
        STREAMING = "streaming"
        COMPLETE = "complete"
        FAILED = "failed"
        STOPPED = "stopped"
        INTERRUPTED = "interrupted"

    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.STREAMING, db_index=True
    )
    # Continuity: what this turn sent upstream and what its COMPLETE gave back (any length).
    upstream_chat_id = models.TextField(blank=True)
    from_checkpoint_id = models.TextField(blank=True)
    checkpoint_id = models.TextField(blank=True)
    is_restart = models.BooleanField(
        default=False, help_text="Started a fresh upstream conversation for this chat."
    )
    # The answer: the exact concatenation of ANSWER contents, and its cited rendering.
    answer_text = models.TextField(blank=True)
    answer_html = models.TextField(blank=True)
    plan = models.JSONField(null=True, blank=True, help_text="The last PLANNING the agent sent.")
    structured_output = models.JSONField(null=True, blank=True)
    # The agent's charts, as `chats.answer.charts.chart_for_turn` made them safe to draw.
    charts = models.JSONField(default=list, blank=True)
    consumption = models.JSONField(default=list, blank=True)

    class ErrorKind(models.TextChoices):
        NONE = "", "none"
        AGENT = "agent", "the agent reported an error"
        HTTP = "http", "the agent refused the request"
        CANNOT_CONTINUE = "cannot_continue", "the conversation cannot be continued upstream"
        UNREACHABLE = "unreachable", "the agent could not be reached"
        STALLED = "stalled", "the agent stopped sending"
        DROPPED = "dropped", "the connection dropped"
        INCOMPLETE = "incomplete", "the stream ended early"
        SERVER = "server", "the server stopped during the run"
        LIMIT = "limit", "the answer reached a limit of this site"
        UNSAVED = "unsaved", "the answer could not be saved"

    error = models.TextField(blank=True)
    error_kind = models.CharField(max_length=32, choices=ErrorKind.choices, blank=True)
    tool_error_count = models.PositiveIntegerField(default=0)
    malformed_lines = models.PositiveIntegerField(default=0)
    sanitized_events = models.PositiveIntegerField(
        default=0,
        help_text="Events stored with something replaced that the database could not store "
        "(NUL, lone surrogates, NaN or Infinity, nesting too deep).",
    )
    notices = models.JSONField(
        default=list,
        blank=True,
        help_text="What of the agent's stream could not be shown, in words "
        "(chats.answer.display.turn_notices).",
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The run renews its lease while it streams; a lapsed lease means its process died.
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Workflows: what was run (`template`, `input`, `model_name`, `time_range`) and the upstream
    # execution id from the `delta` envelope, sent back to resume the stream.
    workflow = models.JSONField(null=True, blank=True)
    execution_id = models.CharField(max_length=500, blank=True)
    # The question options this turn was asked with (chats/agent/options.py, `to_json`): what
    # "Re-run" and a watch ask again. NULL: not recorded (the chat's options are used).
    options = models.JSONField(null=True, blank=True)

    objects = TurnQuerySet.as_manager()

    # Not a field: the month's usage warning a finish gave this turn (chats.usage.records), which
    # its card shows. A class default: a card's lookup of a missing attribute costs a dir().
    usage_warning = ""

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["chat", "parent"])]

    def __str__(self) -> str:
        return f"Turn {self.pk}: {self.question[:60]}"

    @property
    def is_finished(self) -> bool:
        return self.status != self.Status.STREAMING

    @property
    def can_retry(self) -> bool:
        return self.status in {self.Status.FAILED, self.Status.STOPPED, self.Status.INTERRUPTED}

    @property
    def duration(self):
        return self.finished_at - self.created_at if self.finished_at else None


class TurnEvent(models.Model):
    """One upstream event, in arrival order (`seq` starts at 1 for each turn)."""

    # No index of its own: the unique (turn, seq) index serves every lookup by turn, and one
    # index fewer is one B-tree write fewer for each of the thousands of events a second.
    # No constraint in the database either: the log's writer checks a batch's turns in one
    # query rather than the database once a row (chats.live.event_log, `write_batch`).
    turn = models.ForeignKey(
        Turn,
        on_delete=models.CASCADE,
        related_name="events",
        db_index=False,
        db_constraint=False,
    )
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=40)
    data = models.JSONField(help_text="The event as received: the envelope's message or delta.")
    # The database's default too: the event log's COPY on PostgreSQL leaves the column to it.
    received_at = models.DateTimeField(default=timezone.now, db_default=Now())

    class Meta:
        ordering = ["turn", "seq"]
        constraints = [models.UniqueConstraint(fields=["turn", "seq"], name="unique_event_seq")]

    def __str__(self) -> str:
        return f"#{self.seq} {self.type}"


class OpenSocket(models.Model):
    """A chat websocket that is open now, in any process: the per-user socket cap counts these.

    Each process renews the leases of its own sockets; a row whose lease lapsed belongs to a
    process that died and is not counted.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="open_sockets"
    )
    channel_name = models.CharField(max_length=200, unique=True)
    lease_expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return self.channel_name


class ChatSearchDocument(models.Model):
    """A chat's searchable text: its title, and its questions, answers and sources' names.

    Written only by `chats.library.search`. The full-text index over it depends on the database:
    on PostgreSQL `search_vector` (GIN-indexed), on SQLite an FTS5 table kept in sync by
    triggers (both made by migration 0006_library); on SQLite `search_vector` stays NULL.
    """

    chat = models.OneToOneField(Chat, on_delete=models.CASCADE, related_name="search_document")
    title = models.TextField(blank=True)
    body = models.TextField(blank=True)
    search_vector = SearchVectorField(null=True, editable=False)
    # The chat's updated_at as read with its title: a chat whose updated_at differs has changed
    # since (the search queue's catch-up passes, at start-up and every few minutes, index the
    # chats a process that died had queued: `search.chats_due_for_search`). A copy, not a clock
    # reading, so that neither the clocks of two hosts nor a change committing while the text
    # is read can hide a change. NULL: written before this column. Nullable, so that adding it
    # on SQLite is an ALTER TABLE, not a rebuild of the table that would drop the full-text
    # triggers.
    chat_updated_at = models.DateTimeField(null=True, editable=False)

    def __str__(self) -> str:
        return f"Search text of chat {self.chat_id}"


class ChatShareQuerySet(models.QuerySet):
    def active(self) -> "ChatShareQuerySet":
        return self.filter(revoked_at__isnull=True)


class ChatShare(models.Model):
    """A read-only link to a chat's visible branch as it was when shared (up to `leaf_turn`)."""

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="shares")
    token = models.CharField(max_length=64, unique=True)
    leaf_turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="+")
    # The chat's title when shared: part of the snapshot, so a rename shows only once shared again.
    title = models.CharField(max_length=200, blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ChatShareQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["chat"],
                condition=models.Q(revoked_at__isnull=True),
                name="one_active_share_per_chat",
            )
        ]

    def __str__(self) -> str:
        return f"Share of chat {self.chat_id}"


class SavedUnderAName(models.Model):
    """Something a user saved under a name of their own, listed by that name (each kind declares
    its `owner`, with the related name the user's list of them goes by)."""

    name = models.CharField(max_length=100)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name


class OutputSchema(SavedUnderAName):
    """A structured output schema a user saved, to choose in the composer's options."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="output_schemas"
    )
    schema = models.JSONField(help_text="JSON Schema; top level an object or a list of objects.")


class WorkflowTemplate(SavedUnderAName):
    """An inline Workflows template a user saved (docs/PROTOCOL.md, "Workflows")."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workflow_templates"
    )
    template = models.JSONField(help_text="The inline template object sent as `template`.")


class Preference(models.Model):
    """One user's display preferences, kept on the server so that every device shows them."""

    class Theme(models.TextChoices):
        SYSTEM = "system", "System"  # follow the browser's prefers-color-scheme
        LIGHT = "light", "Light"
        DARK = "dark", "Dark"

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference"
    )
    theme = models.CharField(max_length=10, choices=Theme.choices, default=Theme.SYSTEM)

    def __str__(self) -> str:
        return f"Preferences of user {self.user_id}"


from chats.api.models import ApiToken  # noqa: E402, F401  (registered with this app)
from chats.teams.models import (  # noqa: E402, F401  (registered with this app)
    Team,
    TeamChatShare,
    TeamMembership,
)
from chats.usage.models import (  # noqa: E402, F401  (registered with this app)
    TurnUsage,
    UsageLimit,
    UsageWarning,
)
from chats.watch.models import Watch, WatchRun  # noqa: E402, F401  (registered with this app)
from chats.webhooks.models import (  # noqa: E402, F401  (registered with this app)
    TurnWebhook,
    WebhookDelivery,
    WebhookEndpoint,
)
