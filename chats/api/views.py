"""The JSON API under /api/v1/ (django-ninja: async endpoints, typed input, the OpenAPI document
at /api/v1/openapi.json and browsable docs at /api/v1/docs).

Endpoints stay thin: reads through the selectors the pages use (a chat or turn of another user
is a 404, as on its page; one shared with the user's team is read as its page reads it), writes
through the services the pages use, and only on the user's own chats, turns started through
`chats.run.asks.ask_start` as a page's ask is; their database work on the process's database
thread, as a page's socket's (`chats.loop.database_thread`). docs/API.md describes each endpoint.
"""

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI, Query, Status
from ninja.errors import HttpError
from ninja.pagination import CursorPagination, paginate

from chats.agent.providers import BIGDATA, PROVIDERS, agent_choices, agent_label
from chats.api import schemas, stream
from chats.api.auth import ASK, NOT_VALID, READ, TokenRate
from chats.api.errors import install_handlers
from chats.api.models import ApiToken
from chats.api.selectors import api_token_is_usable
from chats.api.turns import chat_detail_json, chat_json, turn_json
from chats.errors import ErrorCode, RequestRefused
from chats.library.search import chat_search_for_user
from chats.library.selectors import chat_list_query_for_user
from chats.library.services import chat_archive, chat_delete, chat_pin, chat_rename
from chats.live.protocol import parse_client_frame
from chats.loop.database_thread import on_database_thread
from chats.models import Chat, Turn
from chats.run.asks import ask_start
from chats.run.registry import request_stop, run_ended
from chats.selectors import chat_get_readable, turn_get_readable
from chats.services import TurnAsk, chat_create
from chats.webhooks.models import WebhookEndpoint
from chats.webhooks.selectors import (
    webhook_deliveries,
    webhook_endpoint_get_for_user,
    webhook_endpoints_of_user,
)
from chats.webhooks.services import (
    WebhookError,
    turn_webhook_request,
    webhook_endpoint_create,
    webhook_endpoint_delete,
)

api = NinjaAPI(
    title="ResearchSite API",
    version="1",
    description="Chats, cited answers, live event streams and webhooks of ResearchSite. "
    "Authenticate with the header `Authorization: Bearer TOKEN` (tokens: the API tokens page; "
    "the Authorize button here takes one).",
    urls_namespace="api",
    docs_url="/docs",
    openapi_url="/openapi.json",
    throttle=[TokenRate()],
)
install_handlers(api)

ERRORS = {400: schemas.Detail, 401: schemas.Detail, 403: schemas.Detail, 429: schemas.Detail}
MISSING = {**ERRORS, 404: schemas.Detail}
LIMITS = {**MISSING, 409: schemas.Detail, 503: schemas.Detail}


READ_ONLY = "This chat is shared with you to read: ask in a chat of your own."


def chat_to_change(*, user, chat_id: int) -> Chat:
    """A chat the token's user may change: their own. One shared with their team is theirs to
    read only (403); any other does not exist for them (404). Database thread."""
    chat = chat_get_readable(user=user, chat_id=chat_id)
    if chat.owner_id != user.pk:
        raise RequestRefused(READ_ONLY, ErrorCode.READ_ONLY)
    return chat


def owner(request: HttpRequest):
    token: ApiToken = request.auth  # set by READ / ASK
    return token.owner


# --- Agents and chats --------------------------------------------------------------------------


@api.get("/agents", response={200: list[schemas.Agent], **ERRORS}, auth=READ, tags=["chats"])
async def agents(request: HttpRequest):
    """The agents this site knows, and whether each may answer new chats here."""
    offered = dict(agent_choices())
    known = [BIGDATA, *PROVIDERS]
    return [{"id": a, "name": agent_label(a), "available": a in offered} for a in known]


@api.post("/chats", response={201: schemas.Chat, **ERRORS}, auth=ASK, tags=["chats"])
async def chat_new(request: HttpRequest, body: schemas.ChatIn):
    """A new chat (empty until its first turn), answered by `agent` or the default agent."""
    if body.agent is not None and body.agent not in dict(agent_choices()):
        raise HttpError(400, f"No available agent {body.agent!r}: GET /api/v1/agents lists them.")

    def create() -> Chat:
        chat = chat_create(owner=owner(request), provider=body.agent or "")
        if body.title is not None and body.title.strip():
            chat_rename(chat=chat, title=body.title)
        return chat

    return Status(201, chat_json(request, await on_database_thread(create)))


class ChatFilters(schemas.Schema):
    q: str | None = None
    archived: bool = False


class ChatPages(CursorPagination):
    """django-ninja's cursor pages of chats, each as the API shows a chat."""

    async def apaginate_queryset(self, queryset, pagination, request, **params):
        page = await on_database_thread(
            self.paginate_queryset, queryset, pagination, request, **params
        )
        page["results"] = [chat_json(request, found) for found in page["results"]]
        return page


@api.get("/chats", response={200: list[schemas.Chat], **ERRORS}, auth=READ, tags=["chats"])
@paginate(ChatPages, ordering=("-updated_at", "-id"), page_size=20)
async def chats(request: HttpRequest, filters: Query[ChatFilters]) -> QuerySet[Chat]:
    """Your chats, most recently active first: archived ones with `archived=true`; `q` keeps
    those whose title holds it (GET /search searches their text). Pages follow `next`."""
    title = (filters.q or "")[:200]
    return chat_list_query_for_user(
        user=owner(request), archived=filters.archived, title_contains=title
    )


@api.get(
    "/chats/{chat_id}", response={200: schemas.ChatDetail, **MISSING}, auth=READ, tags=["chats"]
)
async def chat(request: HttpRequest, chat_id: int):
    """The chat, every turn of it, and the branch its page shows."""

    def read() -> dict:
        return chat_detail_json(request, chat_get_readable(user=owner(request), chat_id=chat_id))

    return await on_database_thread(read)


@api.patch("/chats/{chat_id}", response={200: schemas.Chat, **MISSING}, auth=ASK, tags=["chats"])
async def chat_update(request: HttpRequest, chat_id: int, body: schemas.ChatPatch):
    """Rename, pin or archive the chat (only the fields sent change)."""

    def update() -> Chat:
        found = chat_to_change(user=owner(request), chat_id=chat_id)
        if body.title is not None:
            chat_rename(chat=found, title=body.title)  # LibraryError: a 400
        if body.pinned is not None:
            chat_pin(chat=found, pinned=body.pinned)
        if body.archived is not None:
            chat_archive(chat=found, archived=body.archived)
        return found

    return chat_json(request, await on_database_thread(update))


@api.delete("/chats/{chat_id}", response={204: None, **MISSING}, auth=ASK, tags=["chats"])
async def chat_remove(request: HttpRequest, chat_id: int):
    """Delete the chat with its turns, answers and share links."""

    def delete() -> None:
        chat_delete(chat=chat_to_change(user=owner(request), chat_id=chat_id))

    await on_database_thread(delete)
    return Status(204, None)


@api.get("/search", response={200: list[schemas.SearchResult], **ERRORS}, auth=READ, tags=["chats"])
async def search(request: HttpRequest, q: str):
    """Your chats matching every word of `q`, best first: "Search chats" (docs/LIBRARY.md)."""
    results = await on_database_thread(chat_search_for_user, user=owner(request), query=q[:200])
    return [{"chat": chat_json(request, r.chat), "snippet": str(r.snippet_html)} for r in results]


# --- Turns -------------------------------------------------------------------------------------


class TurnWait(schemas.Schema):
    wait: bool = False
    stream: bool = False


@api.post(
    "/chats/{chat_id}/turns",
    response={201: schemas.Turn, **LIMITS},
    auth=ASK,
    tags=["turns"],
    openapi_extra={
        "responses": {
            "200": {
                "description": "With `stream=true`: " + stream.DESCRIPTION,
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            }
        }
    },
)
async def turn_new(
    request: HttpRequest, chat_id: int, body: schemas.TurnIn, params: Query[TurnWait]
):
    """Ask a question: a new turn, streaming (its `events_url` follows it live); with
    `wait=true` held until it ends; with `stream=true` the answer is the turn's event stream
    itself (text/event-stream, as its `events_url` gives it). Refused as the page's ask is: 409
    while the chat answers, 429 at AGENT_MAX_CONCURRENT_TURNS."""
    if params.wait and params.stream:
        raise HttpError(400, "Ask for wait or for stream, not both.")
    frame = {
        "type": "ask",
        "message": body.question,
        "research_effort": body.research_effort,
        "parent_turn_id": body.parent_turn_id,
    }
    if body.options is not None:
        frame["options"] = body.options.model_dump(exclude_none=True)
    asked = parse_client_frame(frame)  # the page's rules; a refusal is a 400
    token: ApiToken = request.auth
    chat = await on_database_thread(chat_to_change, user=token.owner, chat_id=chat_id)
    ask = TurnAsk(
        chat=chat,
        question=asked.message,
        research_effort=asked.research_effort,
        parent_turn_id=asked.parent_turn_id,
        options=asked.options,
    )

    async def start() -> Turn:
        started = await ask_start(ask, lambda: api_token_is_usable(token_id=token.pk))
        if started is None:  # revoked or expired while the ask waited
            raise HttpError(401, NOT_VALID)
        turn = started.turn.turn
        if body.webhook:
            await on_database_thread(turn_webhook_request, turn=turn)
        return turn

    if params.stream:
        return await stream.asked_turn_stream(token, chat.pk, start)
    turn = await start()
    if params.wait:
        await run_ended(turn.pk)
    return Status(201, await on_database_thread(_turn_json, request, turn.pk))


def _turn_json(request: HttpRequest, turn_id: int) -> dict:
    return turn_json(request, turn_get_readable(user=owner(request), turn_id=turn_id))


@api.get("/turns/{turn_id}", response={200: schemas.Turn, **MISSING}, auth=READ, tags=["turns"])
async def turn(request: HttpRequest, turn_id: int):
    """The turn: its question, status, cited answer (text, Markdown, citations, sources),
    charts, structured output, usage and options."""

    def read() -> dict:
        return turn_json(request, turn_get_readable(user=owner(request), turn_id=turn_id))

    return await on_database_thread(read)


@api.get(
    "/turns/{turn_id}/events",
    response={**MISSING},
    auth=READ,
    tags=["turns"],
    openapi_extra={
        "responses": {
            "200": {
                "description": stream.DESCRIPTION,
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            }
        },
        "parameters": [
            {
                "name": "Last-Event-ID",
                "in": "header",
                "required": False,
                "schema": {"type": "integer", "minimum": 0},
                "description": "Resume after this event's sequence number.",
            }
        ],
    },
)
async def turn_events(request: HttpRequest, turn_id: int) -> HttpResponse:
    """The turn's events as `text/event-stream`, as its page gets them, to `turn.finished`."""
    return await stream.turn_event_stream(request, request.auth, turn_id)


@api.post(
    "/turns/{turn_id}/stop", response={202: schemas.TurnSummary, **LIMITS}, auth=ASK, tags=["turns"]
)
async def turn_stop(request: HttpRequest, turn_id: int):
    """Stop the turn, keeping what was written (as the page's Stop does)."""
    found = await on_database_thread(turn_get_readable, user=owner(request), turn_id=turn_id)
    if found.chat.owner_id != owner(request).pk:
        raise RequestRefused(READ_ONLY, ErrorCode.READ_ONLY)
    if found.is_finished:
        raise HttpError(409, f"This turn has ended already ({found.status}).")
    await request_stop(found.pk)
    return Status(202, await on_database_thread(_turn_json, request, found.pk))


# --- Webhooks ----------------------------------------------------------------------------------


@api.post(
    "/webhooks", response={201: schemas.WebhookCreated, **ERRORS}, auth=ASK, tags=["webhooks"]
)
async def webhook_new(request: HttpRequest, body: schemas.WebhookIn):
    """Add an endpoint for these events. Its signing secret is in this answer only. The URL
    must pass the site's address rules (no private addresses but WEBHOOK_ALLOWED_HOSTS)."""
    try:
        endpoint, secret = await on_database_thread(
            webhook_endpoint_create, owner=owner(request), url=body.url, events=body.events
        )
    except WebhookError as error:
        raise HttpError(400, str(error)) from error
    return Status(201, {**_webhook_json(endpoint), "secret": secret})


@api.get("/webhooks", response={200: list[schemas.Webhook], **ERRORS}, auth=READ, tags=["webhooks"])
async def webhooks(request: HttpRequest):
    endpoints = await on_database_thread(webhook_endpoints_of_user, user=owner(request))
    return [_webhook_json(endpoint) for endpoint in endpoints]


@api.get(
    "/webhooks/{webhook_id}/deliveries",
    response={200: list[schemas.WebhookDelivery], **MISSING},
    auth=READ,
    tags=["webhooks"],
)
async def webhook_deliveries_list(request: HttpRequest, webhook_id: int):
    """The endpoint's deliveries, newest first: status, attempts, last status code and error."""

    def read() -> list:
        endpoint = webhook_endpoint_get_for_user(user=owner(request), endpoint_id=webhook_id)
        return webhook_deliveries(endpoint=endpoint)

    return await on_database_thread(read)


@api.delete("/webhooks/{webhook_id}", response={204: None, **MISSING}, auth=ASK, tags=["webhooks"])
async def webhook_remove(request: HttpRequest, webhook_id: int):
    def delete() -> None:
        endpoint = webhook_endpoint_get_for_user(user=owner(request), endpoint_id=webhook_id)
        webhook_endpoint_delete(endpoint=endpoint)

    await on_database_thread(delete)
    return Status(204, None)


def _webhook_json(endpoint: WebhookEndpoint) -> dict:
    return {
        "id": endpoint.pk,
        "url": endpoint.url,
        "events": endpoint.events,
        "created_at": endpoint.created_at,
    }
