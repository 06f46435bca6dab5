"""Make sure someone can log in: on a fresh site, create `admin` with a random password."""

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

PASSWORD_FILE = settings.LOCAL_DIR / "admin-password"


class Command(BaseCommand):
    help = "Create the user 'admin' with a random password if there is no user yet."

    def handle(self, *args, **options) -> None:
        users = get_user_model()
        if users.objects.exists():
            hint = f" (the first password is in {PASSWORD_FILE})" if PASSWORD_FILE.exists() else ""
            self.stdout.write(f"Log in with an existing account{hint}.")
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser("admin", email="", password=password)
        settings.LOCAL_DIR.mkdir(exist_ok=True)
        PASSWORD_FILE.write_text(password + "\n")
        PASSWORD_FILE.chmod(0o600)
        self.stdout.write(
            self.style.SUCCESS(
                f"Created the user 'admin' with password {password}\n"
                f"(printed once; also kept in {PASSWORD_FILE}, which git ignores)."
            )
        )
