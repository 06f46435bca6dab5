"""Create or revoke a user's API token from the shell, for operators and scripts.

    manage.py api_token create USERNAME --name NAME --scopes read,ask [--expires-days N]
    manage.py api_token revoke USERNAME --name NAME

`create` prints the new token as its last line (and nowhere else: it is stored hashed).
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from chats.api.services import TokenError, api_token_create, api_token_revoke_named


class Command(BaseCommand):
    help = "Create (printing the token as the last line) or revoke a user's API token."

    def add_arguments(self, parser) -> None:
        parser.add_argument("action", choices=["create", "revoke"])
        parser.add_argument("username")
        parser.add_argument("--name", required=True, help="The token's name (unique per user).")
        parser.add_argument(
            "--scopes", default="read,ask", help="Comma-separated: read, ask (default: both)."
        )
        parser.add_argument(
            "--expires-days", type=int, default=None, help="Expire after this many days."
        )

    def handle(self, *args, **options) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"No user named {options['username']!r}.")
        if options["action"] == "revoke":
            if not api_token_revoke_named(owner=user, name=options["name"]):
                raise CommandError(
                    f"{user.username} has no unrevoked token named {options['name']!r}."
                )
            self.stdout.write(f"Revoked {user.username}'s token {options['name']!r}.")
            return
        days = options["expires_days"]
        expires_at = timezone.now() + timedelta(days=days) if days is not None else None
        scopes = [s.strip() for s in options["scopes"].split(",") if s.strip()]
        try:
            token, raw = api_token_create(
                owner=user, name=options["name"], scopes=scopes, expires_at=expires_at
            )
        except TokenError as error:
            raise CommandError(str(error)) from error
        expiry = f", expires {token.expires_at:%Y-%m-%d %H:%M} UTC" if token.expires_at else ""
        self.stdout.write(
            f"Created {user.username}'s token {token.name!r} ({', '.join(token.scopes)}{expiry})."
            " It is shown once, below:"
        )
        self.stdout.write(raw)
