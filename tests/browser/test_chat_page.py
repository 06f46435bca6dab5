"""The chat page in real Chromium: ask, watch, keep; branch; reload mid-answer; hostile text."""

from __future__ import annotations

from playwright.sync_api import expect

from chats.models import Turn
from demo_agent.scripted import Reply
from tests.browser.conftest import ask, log_in, new_chat, wait_for_answer


def test_ask_watch_the_agent_work_and_keep_the_cited_answer(page, site, analyst):
    log_in(page, site)
    new_chat(page)
    ask(page, "How did NVIDIA's data center business do?")

    turn = page.locator(".turn").first
    expect(page.locator(".chat-head h1")).to_have_text("How did NVIDIA's data center business do?")
    expect(turn.locator("[data-plan] li").first).to_be_visible()  # the research plan
    expect(turn.locator("[data-activity] li").filter(has_text="Searching:").first).to_be_visible()
    expect(turn.locator("[data-answer]")).not_to_be_empty()  # the answer streams in
    expect(page.get_by_role("button", name="Answering…")).to_be_disabled()

    answer = wait_for_answer(page)
    expect(answer.locator(".answer.cited")).to_contain_text("NVIDIA")
    expect(answer.get_by_role("heading", name="Sources")).to_be_visible()
    first_marker = answer.locator(".answer.cited sup a").first
    expect(first_marker).to_be_visible()
    cited_html = answer.locator(".answer.cited").inner_html()

    page.reload()
    kept = page.locator(".turn").first
    expect(kept.locator(".answer.cited")).to_be_visible()
    assert kept.locator(".answer.cited").inner_html() == cited_html
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    assert page.js_errors == []


def test_shift_enter_is_a_newline_and_enter_sends(page, site, analyst):
    log_in(page, site)
    new_chat(page)
    box = page.get_by_label("Message")
    box.fill("Line one")
    box.press("Shift+Enter")
    box.type("line two about Apple")
    assert box.input_value() == "Line one\nline two about Apple"
    box.press("Enter")
    expect(page.locator(".turn .question-text").first).to_have_text(
        "Line one\nline two about Apple"
    )
    wait_for_answer(page)


def test_branching_edit_switch_and_reload_keep_the_same_tree(page, site, analyst):
    log_in(page, site)
    new_chat(page)
    ask(page, "How is NVIDIA doing?", effort="lite")
    wait_for_answer(page, 0)
    ask(page, "What about its margins?")
    second = wait_for_answer(page, 1)
    expect(second.locator(".answer.cited")).to_contain_text(
        "NVIDIA"
    )  # the follow-up knew the company

    # Edit the first question: a new version of it, on a new branch from the start.
    page.locator(".turn").first.get_by_role("button", name="Edit").click()
    expect(page.get_by_label("Message")).to_have_value("How is NVIDIA doing?")
    page.get_by_label("Message").fill("How is Microsoft doing?")
    page.get_by_label("Message").press("Enter")
    edited = wait_for_answer(page, 0)
    expect(page.locator(".turn")).to_have_count(1)
    expect(edited.locator(".branch-position")).to_have_text("2 / 2")
    expect(edited.locator(".answer.cited")).to_contain_text("Microsoft")
    expect(edited.locator(".answer.cited")).not_to_contain_text("NVIDIA")

    # Switch back to the first version: its follow-up comes back with it.
    edited.get_by_role("button", name="Previous version").click()
    expect(page.locator(".turn")).to_have_count(2)
    expect(page.locator(".turn").first.locator(".branch-position")).to_have_text("1 / 2")
    expect(page.locator(".turn .question-text").nth(1)).to_have_text("What about its margins?")

    page.reload()
    expect(page.locator(".turn")).to_have_count(2)
    expect(page.locator(".turn").first.locator(".branch-position")).to_have_text("1 / 2")

    page.locator(".turn").first.get_by_role("button", name="Next version").click()
    expect(page.locator(".turn")).to_have_count(1)
    expect(page.locator(".turn .question-text")).to_have_text("How is Microsoft doing?")
    page.reload()
    expect(page.locator(".turn .question-text")).to_have_text("How is Microsoft doing?")
    assert page.js_errors == []


WORDS = [f"word{i:03d} " for i in range(120)]


def test_reload_mid_answer_shows_the_whole_answer_once(page, site, analyst, upstream):
    messages = [
        {
            "type": "PLANNING",
            "plan": {"title": "Plan", "steps": [{"description": "Write", "status": "IN_PROGRESS"}]},
        }
    ]
    messages += [{"type": "ANSWER", "content": w} for w in WORDS]
    messages += [{"type": "COMPLETE", "checkpoint_id": "ckpt-r", "consumption": []}]
    upstream.queue(Reply.events(*messages, pause=0.03))
    log_in(page, site)
    new_chat(page)
    ask(page, "Write slowly")
    expect(page.locator("[data-answer]")).to_contain_text("word010")
    page.reload()  # mid-answer
    expect(page.locator(".turn")).to_have_count(1)
    answer = wait_for_answer(page)
    text = answer.locator(".answer.cited").inner_text()
    assert text.strip() == "".join(WORDS).strip()
    for word in ("word000", "word060", "word119"):
        assert text.count(word) == 1
    assert Turn.objects.get().status == Turn.Status.COMPLETE


def test_stop_keeps_the_partial_answer(page, site, analyst, upstream):
    upstream.queue(Reply.events(*[{"type": "ANSWER", "content": w} for w in WORDS], pause=0.1))
    log_in(page, site)
    new_chat(page)
    ask(page, "Write slowly")
    expect(page.locator("[data-answer]")).to_contain_text("word003")
    page.get_by_role("button", name="Stop").click()
    turn = wait_for_answer(page)
    expect(turn.get_by_text("Stopped. The partial answer is kept.")).to_be_visible()
    expect(turn.get_by_role("button", name="Retry")).to_be_visible()
    stored = Turn.objects.get()
    assert stored.status == Turn.Status.STOPPED
    assert stored.answer_text.startswith("word000 word001 word002 word003")
    assert len(stored.answer_text) < len("".join(WORDS))


HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> [^1] '
HOSTILE_URL = "javascript:window.__pwned=3"


def test_hostile_answer_and_sources_cannot_run_script(page, site, analyst, upstream):
    answer = f"Claim one {HOSTILE}is here. Claim two [x](javascript:window.__pwned=4) too."
    source = {
        "type": "BIGDATA",
        "id": "evil-1",
        "hd": '"><script>window.__pwned=5</script>',
        "src_name": '<img src=x onerror="window.__pwned=6">Evil Wire',
        "ts": "2026-01-02T00:00:00Z",
        "url": HOSTILE_URL,
    }
    external = {
        "type": "EXTERNAL",
        "id": "evil-2",
        "hd": "<svg onload=window.__pwned=7>",
        "ts": "2026-01-03T00:00:00Z",
        "action": {
            "name": "Bad <b onmouseover=window.__pwned=8>Site</b>",
            "url": 'https://ok.example/" onmouseover="window.__pwned=9',
        },
    }
    end_one = answer.index(" Claim two")
    upstream.queue(
        Reply.events(
            {
                "type": "GROUNDING",
                "references": [
                    {
                        "start": 0,
                        "end": end_one,
                        "tool_name": "search",
                        "audit_id": "a",
                        "source": source,
                    },
                    {
                        "start": end_one + 1,
                        "end": len(answer),
                        "tool_name": "search",
                        "audit_id": "a",
                        "source": external,
                    },
                ],
            },
            {"type": "ANSWER", "content": answer},
            {"type": "COMPLETE", "checkpoint_id": "c", "consumption": []},
        )
    )
    log_in(page, site)
    new_chat(page)
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    ask(page, "<script>window.__pwned = 10</script>")
    turn = wait_for_answer(page)
    cited = turn.locator(".answer.cited")
    expect(cited).to_contain_text("Claim one")
    expect(cited.get_by_text("Evil Wire", exact=False).first).to_be_visible()
    # Hover everything that could carry a handler, evidence cards included.
    for link in cited.locator("a:visible").all():
        link.hover()
        for inner in page.locator(".evidence-popover a:visible").all():
            inner.hover()
        page.keyboard.press("Escape")  # the card stays open while the pointer is on it
    page.mouse.move(0, 0)
    page.reload()
    wait_for_answer(page)
    assert page.evaluate("window.__pwned") is None
    assert dialogs == []
    handlers = page.locator(".turn *").evaluate_all(
        "els => els.flatMap(e => [...e.attributes].map(a => a.name))"
        ".filter(n => n.startsWith('on'))"
    )
    assert handlers == [], "an event handler attribute survived"
    assert page.locator(".turn script, .turn img, .turn svg, .turn iframe").count() == 0
    hrefs = page.locator(".answer.cited a").evaluate_all(
        "els => els.map(e => e.getAttribute('href'))"
    )
    assert all(h.startswith(("https://", "http://", "#")) for h in hrefs), hrefs
    assert "&lt;script&gt;" in page.locator(".answer.cited").inner_html()  # shown as text
    assert page.js_errors == []
    assert (
        page.locator(".turn .question-text").inner_text() == "<script>window.__pwned = 10</script>"
    )


def test_live_and_finished_turns_use_the_same_words(page, site, analyst, upstream):
    """The server words every label: a plan step reads "in progress" live and after."""
    upstream.queue(
        Reply.events(
            {
                "type": "PLANNING",
                "plan": {
                    "title": "Plan <b>",
                    "steps": [{"description": "Look it up", "status": "IN_PROGRESS"}],
                },
            },
            {
                "type": "ACTION",
                "tool_name": "search",
                "tool_arguments": {"query": "NVIDIA margins"},
            },
            {
                "type": "AUDIT",
                "audit_traces": [
                    {
                        "audit_type": "SearchAuditV1",
                        "tool_id": "a1",
                        "query": {"text": "NVIDIA margins"},
                        "results": [],
                    }
                ],
            },
            *[{"type": "ANSWER", "content": w} for w in WORDS[:40]],
            {"type": "COMPLETE", "checkpoint_id": "ckpt-w", "consumption": []},
            pause=0.05,
        )
    )
    log_in(page, site)
    new_chat(page)
    ask(page, "  Margins,\n please  ")
    expect(page.locator(".chat-head h1")).to_have_text("Margins, please")
    assert page.title() == "Margins, please · ResearchSite"
    live = page.locator(".turn").first
    expect(live.locator("[data-plan] .plan-title")).to_have_text("Plan <b>")
    expect(live.locator("[data-plan] .step-status")).to_have_text("in progress")
    expect(live.locator("[data-activity] li")).to_have_text(["Searching: NVIDIA margins"])

    finished = wait_for_answer(page)
    finished.locator(".trail summary").click()
    expect(finished.locator(".trail .plan-title")).to_have_text("Plan <b>")
    expect(finished.locator(".trail .step-status")).to_have_text("in progress")
    expect(finished.locator(".trail ul li")).to_have_text(["Searched: NVIDIA margins"])
    assert page.js_errors == []


def test_logging_out_in_another_tab_closes_the_chat_socket(page, site, analyst):
    log_in(page, site)
    new_chat(page)
    expect(page.get_by_label("Message")).to_be_visible()
    page.wait_for_timeout(300)  # the socket is open
    other = page.context.new_page()
    other.goto(site)
    other.get_by_role("button", name="Log out").click()
    other.wait_for_url(lambda url: "/login/" in url)
    expect(page.locator("#connection")).to_have_text(
        "You have logged out. Log in again to keep asking."
    )
    page.wait_for_timeout(1500)  # no reconnect loop replaces the reason
    expect(page.locator("#connection")).to_have_text(
        "You have logged out. Log in again to keep asking."
    )
    assert page.js_errors == []
