"""The HTML the layers below the pages send them: drawn by the page layer's templates.

The live layer's event views (a plan, a chart) and the run's turn cards carry HTML that pages
insert as they get it, so that a streaming turn and a reloaded one look the same. Templates are
the page layer's (`chats.pages.fragments`), which the layers below may not import: the app
registers its renderers here when it is ready (`chats.apps`), and the live and run layers hand
them data. Each renders one template, once per event or card: nothing more on the hot path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Fragments:
    # Charts as `chats.answer.charts.chart_for_turn` made them safe to draw.
    charts: Callable[[list[dict[str, Any]]], str]
    # A research plan: its title and steps ({"title", "status"}).
    plan: Callable[[str, list[dict[str, str]]], str]
    # A turn's card, from a `chats.selectors.BranchTurn` (the turn and its versions).
    turn_card: Callable[[Any], str]


_registered: list[Fragments] = []


def register_fragments(fragments: Fragments) -> None:
    """Set how fragments are drawn (the page layer, at the app's start; again: replaced)."""
    _registered[:] = [fragments]


def fragments() -> Fragments:
    if not _registered:
        raise RuntimeError("No fragment renderers: chats.apps registers them when it is ready.")
    return _registered[0]
