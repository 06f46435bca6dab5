"""The review admin, registered when Django's admin autodiscovers `chats.admin`."""

from chats.admin import (  # noqa: F401 (each registers its models)
    api,
    library,
    review,
    teams,
    usage,
    watches,
)
