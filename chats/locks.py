"""The row lock that serialises one user's limited writes, in every process.

A limit on a user's rows (watches, webhook endpoints, open sockets, streaming turns) is a count
then an insert; two requests of one user at once would both see room for one more. Each such
write first locks its user's row, so those requests are counted one at a time. On SQLite the
database's single writer already serialises them; the lock is what holds on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth import get_user_model


def lock_users(user_ids: Iterable[int]) -> None:
    """Lock these users' rows until the transaction ends, in id order so that two transactions
    never each hold a row the other waits for. FOR NO KEY UPDATE: nothing here changes a key, so
    foreign-key checks elsewhere (a turn's events being logged, say) need not wait for it."""
    users = get_user_model().objects.select_for_update(no_key=True).filter(pk__in=user_ids)
    list(users.order_by("pk").values_list("pk", flat=True))
