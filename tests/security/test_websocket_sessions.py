"""The websocket's session and user come from channels' middleware; its frames skip the session
wrapper, which acts only on HTTP responses (researchsite.websocket_sessions)."""

from __future__ import annotations

import pytest
from channels.sessions import InstanceSessionWrapper
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from researchsite.websocket_sessions import websocket_auth_stack

pytestmark = pytest.mark.django_db(transaction=True)


def test_channels_saves_sessions_and_sets_cookies_only_on_http_responses():
    """If a channels upgrade starts acting on a websocket message, passing `send` around its
    wrapper would skip that: this fails first."""
    acted_on = {*InstanceSessionWrapper.save_message_types}
    acted_on |= {*InstanceSessionWrapper.cookie_response_message_types}
    assert acted_on == {"http.response.start"}


async def test_a_websocket_gets_its_user_and_session_and_the_servers_send(user, session_cookie):
    seen = {}

    async def app(scope, receive, send):
        seen.update(user=scope["user"], session_key=scope["session"].session_key, send=send)
        await send({"type": "websocket.accept"})

    stack = websocket_auth_stack(app)

    async def server_side(scope, receive, send):
        seen["server_send"] = send
        await stack(scope, receive, send)

    communicator = WebsocketCommunicator(
        server_side, "/ws/", headers=[(b"cookie", session_cookie.encode())]
    )
    connected, _ = await communicator.connect(timeout=5)
    await communicator.disconnect()
    assert connected
    assert seen["user"].pk == user.pk
    assert seen["session_key"] == session_cookie.split("=", 1)[1]
    assert seen["send"] is seen["server_send"]


def signed_in_key(user) -> str:
    """The key of a new session of `user`, signed in as a browser is."""
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def session_cases(django_user_model) -> list[tuple[str, list[str]]]:
    """(name, two keys of like sessions) for every way a socket's session may or may not sign
    it in: one for channels to read, one for the batch (a stale session is flushed once read)."""
    from datetime import timedelta

    from django.contrib.auth import BACKEND_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore
    from django.contrib.sessions.models import Session
    from django.utils import timezone

    def user(name: str):
        return django_user_model.objects.create_user(name, password="pw-1234567890")

    def twice(make) -> list[str]:
        return [make(), make()]

    def stored(**values) -> str:
        session = SessionStore()
        for name, value in values.items():
            session[name] = value
        session.create()
        return session.session_key

    alice, bob, carol, dave, erin = map(user, ("alice", "bob", "carol", "dave", "erin"))
    cases = [("alice", twice(lambda: signed_in_key(alice)))]
    cases.append(("alice again", twice(lambda: signed_in_key(alice))))
    cases.append(("password changed since", twice(lambda: signed_in_key(bob))))
    bob.set_password("a-new-password-42")
    bob.save()
    cases.append(("no longer active", twice(lambda: signed_in_key(carol))))
    django_user_model.objects.filter(pk=carol.pk).update(is_active=False)
    cases.append(("deleted user", twice(lambda: signed_in_key(dave))))
    dave.delete()
    expired = twice(lambda: signed_in_key(erin))
    Session.objects.filter(pk__in=expired).update(expire_date=timezone.now() - timedelta(1))
    cases.append(("expired", expired))
    claims = {SESSION_KEY: str(alice.pk), BACKEND_SESSION_KEY: "elsewhere.Backend"}
    cases.append(("unknown backend", twice(lambda: stored(**claims))))
    cases.append(("signed out", twice(stored)))
    return [*cases, ("no such session", ["x" * 32] * 2), ("malformed key", ["short"] * 2)]


def test_users_of_sessions_opening_together_are_channels_users_of_each(
    django_user_model, django_assert_max_num_queries
):
    """One batch answers as channels' `get_user` answers each session alone (users and
    AnonymousUser alike, a stale password's session flushed), from two queries."""
    from channels.auth import get_user
    from django.contrib.sessions.backends.db import SessionStore
    from django.contrib.sessions.models import Session

    from researchsite.websocket_sessions import users_of_sessions

    cases = session_cases(django_user_model)
    channels_users = [get_user.func({"session": SessionStore(keys[0])}) for _, keys in cases]
    with django_assert_max_num_queries(4):  # the sessions, the users; the stale one's flush, 2
        batch = users_of_sessions([SessionStore(keys[1]) for _, keys in cases])
    for (name, _), ours, theirs in zip(cases, batch, channels_users, strict=True):
        assert (ours.pk, ours.is_authenticated) == (theirs.pk, theirs.is_authenticated), name
    signed_in = [name for (name, _), user in zip(cases, batch, strict=True) if user.pk]
    assert signed_in == ["alice", "alice again"]
    assert batch[0] is not batch[1]  # two sockets of one user: a user object each
    stale = dict(cases)["password changed since"]
    assert not Session.objects.filter(pk__in=stale).exists()  # flushed, by both


def test_a_session_the_database_does_not_keep_is_read_by_its_own_store(user, settings):
    from django.contrib.sessions.backends.cache import SessionStore as CachedSession
    from django.contrib.sessions.backends.db import SessionStore

    from researchsite.websocket_sessions import users_of_sessions

    settings.SESSION_ENGINE = "django.contrib.sessions.backends.cache"
    cached = CachedSession(signed_in_key(user))
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.db"
    assert [u.pk for u in users_of_sessions([cached, SessionStore("y" * 32)])] == [user.pk, None]


async def test_sockets_opening_together_find_their_users_in_one_trip(user, chat):
    """Through the served site: the first socket of a quiet moment goes alone, the rest of the
    burst together; each is let in as its user."""
    import asyncio

    from asgiref.sync import sync_to_async

    from tests.database_thread import database_thread_queries
    from tests.site_sockets import site_socket

    keys = [await sync_to_async(signed_in_key)(user) for _ in range(5)]
    communicators = [site_socket(f"/ws/chats/{chat.pk}/", key) for key in keys]

    async def connect_all() -> None:
        results = await asyncio.gather(*(c.connect(timeout=5) for c in communicators))
        assert all(connected for connected, _ in results)

    queries = await database_thread_queries(connect_all)
    reads = [sql for sql in queries if 'FROM "django_session"' in sql and "SELECT" in sql]
    assert 1 <= len(reads) <= 2, reads
    for communicator in communicators:
        await communicator.send_json_to({"type": "sync", "cursors": {}, "newest_turn_id": 0})
        assert await communicator.receive_nothing(timeout=0.1)  # signed in, not refused
        await communicator.disconnect()
