"""Stored figure checks take the four state names (citations/migrations/0005_check_states.py):
each old status is renamed, a claim not read keeps why, and the rewrite runs back as well."""

from __future__ import annotations

from importlib import import_module

import pytest
from django.apps import apps

from citations.claims import ClaimCheck
from citations.models import Reference

check_states = import_module("citations.migrations.0005_check_states")

pytestmark = pytest.mark.django_db

STORED = [
    ({"status": "supported", "message": "12% found in its source"}, None),
    ({"status": "figure_not_found", "message": "38% not found in its source"}, None),
    ({"status": "no_figures", "message": "no figures to check"}, None),
    (
        {"status": "no_passage", "message": "no passage to check"},
        {"url": "u", "problem": "HTTP 404"},
    ),
    ({"status": "no_passage", "message": "no passage to check"}, None),
]


def test_each_stored_status_becomes_its_state_and_a_claim_not_read_says_why(make_turn):
    turn = make_turn(answer="x")
    for position, (check, page) in enumerate(STORED):
        Reference.objects.create(
            turn=turn, position=position, claim_check=check, page=page, data={}
        )
    Reference.objects.create(turn=turn, position=9, claim_check=None, data={})

    check_states.forwards(apps, None)

    rows = Reference.objects.filter(turn=turn).order_by("position")
    lines = [
        (c.status, c.line)
        for r in rows
        if r.claim_check
        for c in [ClaimCheck.from_dict(r.claim_check)]
    ]
    assert lines == [
        ("supported", "12% found in its source"),
        ("figure not found", "38% not found in its source"),
        ("no figure to check", "no figure to check"),
        ("not read", "not read: HTTP 404"),
        ("not read", "not read: its source sent no passage"),
    ]

    check_states.backwards(apps, None)
    assert [r.claim_check for r in rows.exclude(claim_check=None)] == [c for c, _ in STORED]
