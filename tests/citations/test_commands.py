"""`render_stream` and `export_chat`: output, diagnostics and exit status."""

import json
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """Run manage.py for real: exit status and streams as a shell sees them."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        env={"DJANGO_SETTINGS_MODULE": "tests.settings", "PATH": "/usr/bin:/bin"},
        timeout=60,
    )


def render_stream(*args: str):
    stdout, stderr = StringIO(), StringIO()
    error = None
    try:
        call_command("render_stream", *args, stdout=stdout, stderr=stderr)
    except CommandError as exc:
        error = str(exc)
    return stdout.getvalue(), stderr.getvalue(), error


# --- render_stream -------------------------------------------------------------------------


def test_a_completed_capture_exits_0_with_the_rendering_on_stdout(stream_fixtures_dir):
    capture = stream_fixtures_dir / "workflow.sse"
    result = run("render_stream", str(capture))
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == capture.with_suffix(".md").read_text(encoding="utf-8")


def test_stdin_is_read_with_a_dash(stream_fixtures_dir):
    capture = stream_fixtures_dir / "dedup.sse"
    result = run("render_stream", "-", stdin=capture.read_text(encoding="utf-8"))
    assert result.returncode == 0
    assert result.stdout == capture.with_suffix(".md").read_text(encoding="utf-8")


def test_an_error_capture_prints_the_partial_answer_and_exits_1(stream_fixtures_dir):
    capture = stream_fixtures_dir / "error.sse"
    result = run("render_stream", str(capture))
    assert result.returncode == 1
    assert result.stdout == capture.with_suffix(".md").read_text(encoding="utf-8")
    assert "ERROR: Request failed: upstream model unavailable" in result.stderr


def test_a_stream_without_complete_or_error_is_partial(stream_fixtures_dir):
    lines = (stream_fixtures_dir / "lifecycle.sse").read_text(encoding="utf-8").splitlines()
    stdout, _, error = render_stream_text("\n".join(lines[:-1]))
    assert stdout.startswith("NVIDIA's gross margin was 72.4% in Q2 FY26.[^1]")
    assert "without COMPLETE or ERROR" in error


def render_stream_text(text: str, *args: str):
    sys_stdin = sys.stdin
    sys.stdin = StringIO(text)
    try:
        return render_stream("-", *args)
    finally:
        sys.stdin = sys_stdin


def test_malformed_lines_and_invalid_references_are_reported_on_stderr():
    capture = "\n".join(
        [
            ": heartbeat",
            'data: {"message": {"type": "ANSWER", "content": "Sales rose."}}',
            "data: {not json",
            'data: {"neither": "envelope"}',
            'data: {"message": {"type": "GROUNDING", "references": ['
            '{"start": 0, "end": 11, "source": {"id": "s", "src_name": "AP", "url": "https://ap.example"}},'
            '{"start": 5, "end": 99, "source": null}, "junk"]}}',
            'data: {"message": {"type": "COMPLETE"}}',
        ]
    )
    stdout, stderr, error = render_stream_text(capture)
    assert error is None
    assert stdout == "Sales rose.[^1]\n\n[^1]: [AP](https://ap.example)\n"
    assert "Skipped 2 malformed line(s)." in stderr
    assert "Skipped 2 invalid reference(s):" in stderr
    assert "reference #1: end 99 is beyond the answer (11 characters)" in stderr
    assert "reference #2: not an object" in stderr


def test_json_and_html_formats(stream_fixtures_dir):
    capture = str(stream_fixtures_dir / "lifecycle.sse")
    stdout, _, error = render_stream(capture, "--format", "json")
    assert error is None and json.loads(stdout)["numbering"][0] == {"offset": 43, "footnotes": [1]}
    stdout, _, error = render_stream(capture, "--format", "html")
    assert error is None and stdout.count('<li id="fn-answer-') == 2


def test_an_unreadable_file_is_a_command_error(tmp_path):
    with pytest.raises(CommandError, match="Cannot read"):
        call_command("render_stream", str(tmp_path / "missing.sse"))


# --- export_chat ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_export_chat_prints_the_active_branch(chat, make_turn):
    root = make_turn("First?", "One.")
    make_turn("Abandoned?", "Old.", parent=root)
    leaf = make_turn("Second?", "Two.", parent=root)
    chat.active_turn = leaf
    chat.save()
    stdout = StringIO()
    call_command("export_chat", str(chat.pk), stdout=stdout)
    assert stdout.getvalue() == "## First?\n\nOne.\n\n## Second?\n\nTwo.\n"


@pytest.mark.django_db
def test_export_chat_refuses_an_unknown_chat():
    with pytest.raises(CommandError, match="Chat 424242 does not exist"):
        call_command("export_chat", "424242")


def test_a_ten_thousand_reference_grounding_event_prints_every_footnote():
    from tests.grounding_bodies import answer_body

    body = answer_body(10_000)  # its GROUNDING line is over 4 MB
    assert max(len(line) for line in body.splitlines()) > 4_000_000
    stdout, stderr, error = render_stream_text(body)
    assert error is None
    assert "AGENT_MAX_LINE_BYTES" not in stderr
    footnotes = [line for line in stdout.splitlines() if line.startswith("[^")]
    assert [line.split("]", 1)[0] for line in footnotes] == [f"[^{n}" for n in range(1, 10_001)]
    assert stdout.count("[^10000]") == 2  # its marker and its footnote


def test_a_line_over_the_cap_is_said_on_stderr(settings):
    from chats.agent.providers.bigdata import BigdataAdapter
    from chats.agent.sse import StreamReader, iter_events
    from chats.agent.transcript import Transcript
    from tests.grounding_bodies import answer_body

    reader = StreamReader(BigdataAdapter(), max_line_chars=100_000)
    transcript = Transcript.from_events(iter_events(answer_body(1_000), reader))
    size = len(answer_body(1_000).splitlines()[2].encode())
    assert transcript.skipped == [
        f"The agent's sources ({size / 1000:.0f} KB) were over AGENT_MAX_LINE_BYTES"
        " and are not shown."
    ]
    assert transcript.citations == [] and transcript.completed
