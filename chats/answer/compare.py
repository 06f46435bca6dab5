"""Versions of a turn and their comparison: which two to compare, and the comparison itself.

The versions are `chats.selectors.turn_versions`'s. The comparison is the core's
(`citations.compare`), of the two stored cited answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from chats.models import Turn
from citations.compare import AnswerComparison, compare_answers
from citations.selectors import answer_versions_to_compare


@dataclass(frozen=True)
class VersionPair:
    versions: list[Turn]  # every finished version, oldest first
    before: Turn
    after: Turn

    def number(self, turn: Turn) -> int:
        """The version's place among its siblings, as the switcher shows it ("2 / 3")."""
        return self.versions.index(turn) + 1


def version_pair(
    *, versions: list[Turn], before_id: int | None = None, after_id: int | None = None
) -> VersionPair | None:
    """Choose the two versions to compare: the ones asked for if they are versions, by default
    the newest and the one before it. None when there are fewer than two."""
    if len(versions) < 2:
        return None
    by_id = {version.pk: version for version in versions}
    after = by_id.get(after_id) if after_id is not None else None
    after = after or versions[-1]
    before = by_id.get(before_id) if before_id is not None else None
    if before is None or before.pk == after.pk:
        earlier = [v for v in versions if v.pk != after.pk and v.created_at <= after.created_at]
        before = earlier[-1] if earlier else next(v for v in versions if v.pk != after.pk)
    return VersionPair(versions, before, after)


def compare_turns(*, before: Turn, after: Turn) -> AnswerComparison:
    """Compare two stored versions' cited answers (one query for both)."""
    cited = answer_versions_to_compare([before, after])
    return compare_answers(cited[before.pk], cited[after.pk])
