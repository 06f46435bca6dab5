"""The review admin, registered when Django's admin autodiscovers `chats.admin`."""

from chats.admin import library, review, teams, usage, watches  # noqa: F401 (each registers its models)
