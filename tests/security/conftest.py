"""Fixtures for the security edge: a signed-in user's session cookie and chat."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from chats.models import Chat

PASSWORD = "pw-analyst-123"


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("analyst", password=PASSWORD)


@pytest.fixture
def chat(user):
    return Chat.objects.create(owner=user)


@pytest.fixture
def session_cookie(user) -> str:
    """The Cookie header of a browser signed in as `user`."""
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def fresh_site_settings(monkeypatch, **environment):
    """Evaluate researchsite/settings.py again under `environment` (a copy; Django's stays)."""
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    path = Path(__file__).resolve().parents[2] / "researchsite" / "settings.py"
    spec = importlib.util.spec_from_file_location("researchsite_settings_copy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
