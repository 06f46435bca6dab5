"""What the API's endpoints take and give, as django-ninja schemas: the OpenAPI document is
written from these."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from ninja import Field, Schema


class Agent(Schema):
    id: str
    name: str
    available: bool = Field(description="Configured here: new chats may use it.")


class ChatIn(Schema):
    title: str | None = Field(None, max_length=200)
    agent: str | None = Field(None, description="An available agent's id; else the default.")


class ChatPatch(Schema):
    title: str | None = Field(None, max_length=200)
    pinned: bool | None = None
    archived: bool | None = None


class TurnSummary(Schema):
    id: int
    parent_turn_id: int | None
    question: str
    status: str
    created_at: datetime
    finished_at: datetime | None
    url: str


class Chat(Schema):
    id: int
    title: str
    agent: str
    pinned: bool
    archived: bool
    created_at: datetime
    updated_at: datetime
    url: str = Field(description="The chat's page in the browser.")


class ChatDetail(Chat):
    turns: list[TurnSummary] = Field(description="Every turn of the chat, oldest first.")
    branch: list[int] = Field(description="The turns of the branch the page shows, in order.")


class QuestionOptions(Schema):
    """The browser's "Options": sent with the question, remembered by the chat."""

    model: Literal["base", "pro"] | None = Field(None, description="The model tier.")
    period_start: str | None = Field(None, description="Search from this date (YYYY-MM-DD).")
    period_end: str | None = Field(None, description="Search up to this date (YYYY-MM-DD).")
    entities_all_of: list[str] | None = None
    entities_any_of: list[str] | None = None
    entities_none_of: list[str] | None = None
    sources: list[str] | None = None
    tags: list[str] | None = None
    freshness_boost: int | None = Field(None, ge=1, le=10)
    expected_output: str | None = None
    charts: bool | None = None
    schema_id: int | None = Field(None, description="One of your saved structured output schemas.")


class TurnIn(Schema):
    question: str = Field(description="Up to MESSAGE_MAX_CHARS characters.")
    parent_turn_id: int | Literal["leaf"] | None = Field(
        "leaf",
        description="Continue from this turn (a new version of its follow-up); null: a new first"
        ' question; "leaf" (the default): after the newest turn of the branch the page shows.',
    )
    research_effort: Literal["lite", "standard"] = "standard"
    options: QuestionOptions | None = Field(None, description="None: the chat's saved options.")
    webhook: bool = Field(
        False, description="Send turn.finished to your webhook endpoints when this turn ends."
    )


class Source(Schema):
    id: str = Field(description="The source's key: the same source has the same id everywhere.")
    footnote: int
    title: str
    label: str = Field(description='"Publisher - YYYY-MM-DD", as the footnote reads.')
    url: str
    publisher: str
    published_on: str | None
    placed: bool = Field(description="False: cited for the answer as a whole, without a marker.")


class Check(Schema):
    status: str = Field(
        description="supported, figure not found, no figure to check or not read "
        "(citations.claims.CHECK_STATES)."
    )
    message: str


class Citation(Schema):
    text: str = Field(description="The claim: the answer's text this footnote supports.")
    start: int = Field(description="Where the claim starts in answer_text (code points).")
    end: int = Field(description="Where it ends, and where its footnote marker shows.")
    footnote: int
    source_id: str
    check: Check | None = Field(description="The figure check of the claim; null: not checked.")


class Usage(Schema):
    model: str
    input_tokens: int = Field(description="Every token the model read, cached ones included.")
    cached_tokens: int
    output_tokens: int


class Turn(Schema):
    id: int
    chat_id: int
    parent_turn_id: int | None
    question: str
    research_effort: str
    status: Literal["streaming", "complete", "failed", "stopped", "interrupted"]
    error: str
    answer_text: str = Field(description="The answer as the agent wrote it.")
    answer_markdown: str = Field(
        description="The question and the cited answer with its footnotes, sources and figure"
        ' check, as "Export Markdown" writes it.'
    )
    checks_summary: str = Field(description='"2 cited claims: 2 figures found", or "".')
    citations: list[Citation]
    sources: list[Source]
    charts: list[dict[str, Any]]
    structured_output: Any = None
    usage: list[Usage]
    options: dict[str, Any] | None
    created_at: datetime
    finished_at: datetime | None
    url: str
    events_url: str = Field(description="Its events as text/event-stream (docs/API.md).")


class SearchResult(Schema):
    chat: Chat
    snippet: str = Field(description="HTML: the matched words in <mark>, the rest escaped.")


class WebhookIn(Schema):
    url: str = Field(max_length=2000)
    events: list[Literal["turn.finished", "watch.changed"]] = Field(min_length=1)


class WebhookDelivery(Schema):
    id: int
    event: str
    message_id: str = Field(description="The webhook-id header, the same on every attempt.")
    status: Literal["pending", "delivered", "failed"]
    attempts: int
    last_status_code: int | None
    last_error: str
    created_at: datetime
    last_attempt_at: datetime | None
    next_attempt_at: datetime | None
    delivered_at: datetime | None


class Webhook(Schema):
    id: int
    url: str
    events: list[str]
    created_at: datetime


class WebhookCreated(Webhook):
    secret: str = Field(description="The signing secret (whsec_...): shown once, keep it.")


class Detail(Schema):
    detail: str
