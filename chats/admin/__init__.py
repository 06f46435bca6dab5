"""The review admin, registered when Django's admin autodiscovers `chats.admin`."""

from chats.admin import library, review  # noqa: F401 (each module registers its models)
