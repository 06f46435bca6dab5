"""The websocket's session and user: channels' `AuthMiddlewareStack`, less a wrapper per frame,
its users found together for sockets that open together.

channels' `SessionMiddleware` wraps `send` so that it can save a modified session and set its
cookie on `http.response.start`. A websocket never sends that message, yet the wrapper still
looks the session up (`modified`, `is_empty()`) on every frame it passes on: ~5% of the event
loop's time with 200 chats streaming (docs/PERFORMANCE.md, "Channels' per-message wrappers
skipped"). Here a websocket gets its session exactly as channels builds it, and the server's own
`send`. A test fails if channels ever saves sessions on a websocket message.

channels' `AuthMiddleware` finds each socket's user in a trip of its own to the database thread:
the session, then the user, an ORM query each (0.5-0.6 ms of that thread a socket on SQLite).
Sockets that open together (a restart's reconnects) have theirs found together
(`users_of_sessions`), by channels' rules, which a test holds it to.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from channels.auth import AuthMiddleware
from channels.sessions import CookieMiddleware, InstanceSessionWrapper, SessionMiddleware
from django.conf import settings
from django.contrib.auth import (
    BACKEND_SESSION_KEY,
    HASH_SESSION_KEY,
    SESSION_KEY,
    get_user_model,
    load_backend,
)
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import AnonymousUser
from django.contrib.sessions.backends import db as database_sessions
from django.contrib.sessions.backends.base import SessionBase
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from chats.loop.batches import DatabaseBatches, one_each
from chats.loop.per_loop import PerLoop


class WebsocketSessionMiddleware(SessionMiddleware):
    """channels' session middleware for a websocket: the session in the scope, `send` as is."""

    async def __call__(self, scope, receive, send):
        wrapper = InstanceSessionWrapper(scope, send)
        await wrapper.resolve_session()
        return await self.inner(wrapper.scope, receive, send)


class WebsocketAuthMiddleware(AuthMiddleware):
    """channels' auth middleware, the users of sockets opening together found in one trip."""

    async def resolve_scope(self, scope):
        scope["user"]._wrapped = await _socket_users().submit(scope["session"])


def websocket_auth_stack(inner):
    """`channels.auth.AuthMiddlewareStack(inner)`, with `WebsocketSessionMiddleware` and
    `WebsocketAuthMiddleware` in place of channels' session and auth middleware."""
    return CookieMiddleware(WebsocketSessionMiddleware(WebsocketAuthMiddleware(inner)))


@dataclass(frozen=True)
class _Claim:
    """Who a session says its user is, and how they signed in."""

    user_id: Any
    backend_path: str
    session_hash: str | None


def users_of_sessions(sessions: list[SessionBase]) -> list[Any]:
    """channels' `get_user` for each session, in order (database thread): a signed-in session's
    user, or AnonymousUser; a session whose password hash no longer matches its user's is
    flushed, as channels flushes it. Sessions the database keeps are read in one query, and the
    users a `ModelBackend` finds in one more."""
    claims = [_claim(data) for data in _session_data(sessions)]
    users = _users(claim for claim in claims if claim is not None)
    found: list[Any] = []
    for session, claim in zip(sessions, claims, strict=True):
        user = None if claim is None else users[claim.backend_path, claim.user_id]
        if user is not None and hasattr(user, "get_session_auth_hash"):
            session_hash = claim.session_hash
            if not (
                session_hash and constant_time_compare(session_hash, user.get_session_auth_hash())
            ):
                session.flush()
                user = None
        found.append(user)
    return [user or AnonymousUser() for user in one_each(found)]


_socket_users = PerLoop(lambda: DatabaseBatches(users_of_sessions, name="socket users"))


def _session_data(sessions: list[SessionBase]) -> list[Mapping[str, Any]]:
    """What each session holds: those the database keeps read together (a missing or expired
    one holds nothing, as its store would load it); any other read by its own store."""
    stored = {
        index: session
        for index, session in enumerate(sessions)
        if session.__class__ is database_sessions.SessionStore  # also through channels' LazyObject
    }
    rows: dict[str, str] = {}
    if stored:
        keys = {session.session_key for session in stored.values() if session.session_key}
        model = next(iter(stored.values())).model
        live = model.objects.filter(session_key__in=keys, expire_date__gt=timezone.now())
        rows = dict(live.values_list("session_key", "session_data"))
    data: list[Mapping[str, Any]] = []
    for index, session in enumerate(sessions):
        if index not in stored:
            data.append(session)
        elif session.session_key in rows:
            data.append(session.decode(rows[session.session_key]))
        else:
            data.append({})
    return data


def _claim(data: Mapping[str, Any]) -> _Claim | None:
    """channels' reading of a session: its user's id and a backend the site still lists."""
    try:
        user_id = get_user_model()._meta.pk.to_python(data[SESSION_KEY])
        backend_path = data[BACKEND_SESSION_KEY]
    except KeyError:
        return None
    if backend_path not in settings.AUTHENTICATION_BACKENDS:
        return None
    return _Claim(user_id, backend_path, data.get(HASH_SESSION_KEY))


def _users(claims) -> dict[tuple[str, Any], Any]:
    """Each claimed user, by (backend, id), as its backend's `get_user` finds it: together for
    a backend whose `get_user` is ModelBackend's (by primary key, if it may authenticate)."""
    ids_by_backend: dict[str, set[Any]] = defaultdict(set)
    for claim in claims:
        ids_by_backend[claim.backend_path].add(claim.user_id)
    users: dict[tuple[str, Any], Any] = {}
    for path, ids in ids_by_backend.items():
        backend = load_backend(path)
        if type(backend).get_user is ModelBackend.get_user:
            found = get_user_model()._default_manager.in_bulk(ids)
            for user_id in ids:
                user = found.get(user_id)
                can = user is not None and backend.user_can_authenticate(user)
                users[path, user_id] = user if can else None
        else:
            users.update(((path, user_id), backend.get_user(user_id)) for user_id in ids)
    return users
