"""Socket limits: the per-user count in the database and the per-socket frame rate."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from chats.live.limits import (
    FrameRate,
    socket_open,
    socket_renew_leases,
    sockets_close,
    sockets_open,
)
from chats.models import OpenSocket


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_of_rate_frames_then_rate_frames_a_second():
    clock = Clock()
    bucket = FrameRate(4, clock=clock)
    assert [bucket.allow() for _ in range(5)] == [True] * 4 + [False]
    clock.now += 0.5
    assert [bucket.allow() for _ in range(3)] == [True, True, False]
    assert not bucket.exhausted


def test_only_sustained_refusals_exhaust_the_buckets_patience():
    clock = Clock()
    bucket = FrameRate(4, clock=clock)
    for _ in range(60):  # 15 s at twice the rate: 4 a second refused, 1 a second forgiven
        clock.now += 0.125
        bucket.allow()
        if bucket.exhausted:
            break
    assert bucket.exhausted
    assert 5 < clock.now - 100 < 7.6  # 20 refusals of patience, drained at 3 a second


@pytest.mark.django_db
def test_socket_open_admits_up_to_the_limit_per_user(user, other_user):
    assert socket_open(user_id=user.pk, channel_name="a", limit=2)
    assert socket_open(user_id=user.pk, channel_name="b", limit=2)
    assert not socket_open(user_id=user.pk, channel_name="c", limit=2)
    assert socket_open(user_id=other_user.pk, channel_name="d", limit=2)
    sockets_close(channel_names=["a"])
    assert socket_open(user_id=user.pk, channel_name="c", limit=2)
    assert set(OpenSocket.objects.values_list("channel_name", flat=True)) == {"b", "c", "d"}


@pytest.mark.django_db
def test_sockets_opening_together_are_admitted_in_order_up_to_each_users_limit(
    user, other_user, django_assert_max_num_queries
):
    OpenSocket.objects.create(
        user=user, channel_name="open", lease_expires_at=timezone.now() + timedelta(minutes=1)
    )
    opens = [(user.pk, "a"), (other_user.pk, "b"), (user.pk, "c"), (user.pk, "d")]
    with django_assert_max_num_queries(7):  # the five, the savepoint's two
        admitted = sockets_open(opens, limit=3)
    assert admitted == [True, True, True, False]
    assert set(OpenSocket.objects.values_list("channel_name", flat=True)) == {"open", *"abc"}
    assert sockets_open([], limit=3) == []


@pytest.mark.django_db
def test_lapsed_leases_do_not_count_and_renewed_ones_do(user):
    past = timezone.now() - timedelta(seconds=1)
    OpenSocket.objects.create(user=user, channel_name="dead", lease_expires_at=past)
    OpenSocket.objects.create(user=user, channel_name="alive", lease_expires_at=past)
    socket_renew_leases(channel_names=["alive"])
    assert socket_open(user_id=user.pk, channel_name="new", limit=2)
    assert not socket_open(user_id=user.pk, channel_name="newer", limit=2)
    assert not OpenSocket.objects.filter(channel_name="dead").exists()


@pytest.mark.django_db(transaction=True)
async def test_sockets_closing_together_are_forgotten_in_one_statement(user):
    import asyncio

    from asgiref.sync import sync_to_async

    from chats.live.limits import socket_close
    from tests.database_thread import database_thread_queries

    for name in "abcde":
        await sync_to_async(socket_open)(user_id=user.pk, channel_name=name, limit=10)

    async def close_all() -> None:
        await asyncio.gather(*(socket_close(name) for name in "abcd"))

    queries = await database_thread_queries(close_all)

    assert len([q for q in queries if q.startswith("DELETE")]) == 1
    assert [s.channel_name async for s in OpenSocket.objects.all()] == ["e"]
