from pathlib import Path

import pytest
from django.contrib.auth.models import Permission

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
