"""Every shared capture renders exactly to the Markdown saved beside it."""

import contextlib
import difflib
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from citations.render import render_markdown
from tests.citations.conftest import cited_from_capture


def captures(directory):
    paths = sorted(directory.glob("*.sse"))
    assert paths, f"no captures in {directory}"
    return paths


def diff(expected: str, actual: str) -> str:
    lines = difflib.unified_diff(expected.splitlines(True), actual.splitlines(True))
    return "".join(lines)


def test_every_capture_renders_exactly_to_its_markdown(stream_fixtures_dir):
    mismatches = []
    for capture in captures(stream_fixtures_dir):
        expected = capture.with_suffix(".md").read_text(encoding="utf-8")
        actual = render_markdown(cited_from_capture(capture))
        if actual != expected:
            mismatches.append(f"{capture.name}:\n{diff(expected, actual)}")
    assert not mismatches, "\n".join(mismatches)


def test_render_stream_prints_every_capture_exactly(stream_fixtures_dir):
    for capture in captures(stream_fixtures_dir):
        stdout, stderr = StringIO(), StringIO()
        with contextlib.suppress(CommandError):  # the error capture: see test_commands
            call_command("render_stream", str(capture), stdout=stdout, stderr=stderr)
        assert stdout.getvalue() == capture.with_suffix(".md").read_text(encoding="utf-8"), capture


@pytest.mark.parametrize(
    ("name", "sources", "tools"),
    [
        ("dedup", 3, 0),
        ("error", 1, 0),
        ("lifecycle", 2, 0),
        ("tool_level", 1, 1),
        ("workflow", 1, 0),
    ],
)
def test_the_captures_cover_what_they_are_named_for(stream_fixtures_dir, name, sources, tools):
    cited = cited_from_capture(stream_fixtures_dir / f"{name}.sse")
    assert (len(cited.sources), len(cited.tool_attributions)) == (sources, tools)
    assert not cited.invalid_references
