"""Render a saved streaming body: `render_stream PATH [--provider NAME] [--format F]`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from chats.agent.providers.formats import STREAM_FORMATS
from chats.agent.sse import parse_sse_text
from chats.agent.transcript import Transcript
from citations.evidence import with_checks
from citations.render import render_json, render_markdown
from citations.render_html import render_html
from citations.resolve import CitedAnswer, resolve_citations


class Command(BaseCommand):
    help = (
        "Print the cited answer of a saved SSE capture ('-' reads stdin). Exits 1 when the "
        "stream ended in ERROR or without COMPLETE, after printing the partial answer."
    )
    requires_system_checks: list[str] = []  # an offline tool: no database, no URLconf

    def add_arguments(self, parser):
        parser.add_argument("path", help="the capture file, or - for stdin")
        parser.add_argument(
            "--format", choices=["markdown", "html", "json"], default="markdown", dest="fmt"
        )
        parser.add_argument(
            "--provider",
            choices=sorted(STREAM_FORMATS),
            default="bigdata",
            help="whose wire format the body is in (default: bigdata)",
        )

    def handle(self, *args, path: str, fmt: str, provider: str, **options):
        stream_format = STREAM_FORMATS[provider]
        events, malformed = parse_sse_text(
            _read(path), stream_format.adapter(), json_lines=stream_format.json_lines
        )
        transcript = Transcript.from_events(events)
        cited = with_checks(
            resolve_citations(
                answer=transcript.answer,
                citations=transcript.citations,
                tool_calls=transcript.tool_calls,
            )
        )
        rendering = _render(cited, fmt)
        if rendering:
            self.stdout.write(rendering, ending="" if rendering.endswith("\n") else "\n")

        for notice in transcript.skipped:
            self.stderr.write(notice)
        if malformed:
            self.stderr.write(f"Skipped {malformed} malformed line(s).")
        if invalid := cited.invalid_references:
            self.stderr.write(f"Skipped {len(invalid)} invalid reference(s):")
            for ref in invalid:
                self.stderr.write(f"  reference #{ref.position}: {ref.problem}")
        if transcript.error:
            raise CommandError(f"The stream ended with ERROR: {transcript.error}")
        if not transcript.completed:
            raise CommandError("The stream ended without COMPLETE or ERROR: the answer is partial.")


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read().removeprefix("\ufeff")
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"Cannot read {path}: {exc}") from exc


def _render(cited: CitedAnswer, fmt: str) -> str:
    if fmt == "html":
        return render_html(cited, doc_id="answer")
    if fmt == "json":
        return json.dumps(render_json(cited), ensure_ascii=False, indent=2)
    return render_markdown(cited)
