from pathlib import Path

import pytest
from django.contrib.auth.models import Permission

from chats.log_context import log_context_cleared

# Wire captures and the exact Markdown each must render to (copied verbatim from their sources).
FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures"
STREAMS_DIR = FIXTURES_DIR / "streams"
PROVIDERS_DIR = FIXTURES_DIR / "providers"


@pytest.fixture
def stream_fixtures_dir() -> Path:
    return STREAMS_DIR


@pytest.fixture
def provider_fixtures_dir() -> Path:
    return PROVIDERS_DIR


# What a compliance reviewer is given: staff, and the view permissions of the transcript models.
REVIEWER_PERMISSIONS = [
    "view_chat",
    "view_turn",
    "view_turnevent",
    "view_source",
    "view_reference",
    "view_audittrace",
    "view_sourcepage",
]
REVIEWER_PASSWORD = "review-pass-77"


@pytest.fixture
def reviewer(django_user_model):
    """Staff with view permissions only: the compliance reviewer."""
    user = django_user_model.objects.create_user(
        "reviewer", password=REVIEWER_PASSWORD, is_staff=True
    )
    user.user_permissions.set(Permission.objects.filter(codename__in=REVIEWER_PERMISSIONS))
    return user


@pytest.fixture(autouse=True)
def _fresh_log_context():
    """Each test starts with no log context: a request the sync test client serves binds its id
    in the test thread's context (under ASGI each request has a context of its own)."""
    with log_context_cleared():
        yield
