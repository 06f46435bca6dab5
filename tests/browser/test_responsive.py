"""Every screen in real Chromium: a phone (390 x 844) and a desktop (1280 px), light and dark.

No page is wider than its screen, the chat list opens as a drawer on a phone, a footnote's
evidence is a bottom sheet there, the chosen theme is kept per user, the chat page keeps up with
its first answer without a reload, and axe-core finds no violation on any page type in any of
the four combinations. Set UPDATE_SCREENSHOTS=1 to refresh the screenshots in docs/.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from chats.models import Chat, Preference
from demo_agent.scripted import Reply
from tests.browser.conftest import ask, log_in, new_chat, open_page, wait_for_answer
from tests.conftest import REVIEWER_PASSWORD

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
QUESTION = "How did NVIDIA's data center business do?"
DOCS = Path(__file__).resolve().parents[2] / "docs"
AXE = Axe()


def assert_no_sideways_scroll(page) -> None:
    widths = page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert widths[0] <= widths[1], f"{page.url} is {widths[0]} px wide in {widths[1]} px"


def background_luminance(page) -> float:
    """The relative luminance (WCAG) of the page's background: 0 black, 1 white."""
    return page.evaluate(
        """() => {
          const [r, g, b] = getComputedStyle(document.body).backgroundColor
            .match(/[\\d.]+/g).slice(0, 3).map((c) => {
              const s = Number(c) / 255;
              return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
            });
          return 0.2126 * r + 0.7152 * g + 0.0722 * b;
        }"""
    )


def assert_accessible(page, what: str) -> None:
    results = AXE.run(page)
    assert results.violations_count == 0, f"{what}:\n{results.generate_snapshot()}\n" + "\n".join(
        f"{v['id']}: {[n['target'] for n in v['nodes']][:5]} {v['nodes'][0]['failureSummary']}"
        for v in results.response["violations"]
    )


def keep_screenshot(page, name: str, around=None) -> None:
    """Save the screen (or the part around these locators) as docs/NAME when asked to."""
    if not os.environ.get("UPDATE_SCREENSHOTS"):
        return
    clip = None
    if around:
        boxes = [locator.bounding_box() for locator in around]
        left, top = min(b["x"] for b in boxes) - 24, min(b["y"] for b in boxes) - 24
        right = max(b["x"] + b["width"] for b in boxes) + 24
        bottom = max(b["y"] + b["height"] for b in boxes) + 24
        clip = {"x": max(left, 0), "y": max(top, 0), "width": right - left, "height": bottom - top}
    page.screenshot(path=str(DOCS / name), clip=clip)


@pytest.fixture
def phone_dark(browser):
    page = open_page(browser, viewport=PHONE, scheme="dark", touch=True)
    yield page
    page.context.close()


def test_on_a_dark_phone_the_list_a_new_chat_and_a_cited_passage_fit_the_screen(
    phone_dark, site, analyst
):
    page = phone_dark
    log_in(page, site)
    assert background_luminance(page) < 0.05  # the browser is dark, so is the page
    assert_no_sideways_scroll(page)
    header = page.locator(".site-header")
    log_out = page.get_by_role("button", name="Log out")
    assert log_out.bounding_box()["height"] < 30  # one line
    assert header.bounding_box()["width"] <= PHONE["width"]

    # The list is a drawer behind "Chats": Escape and a tap outside close it.
    chats = page.get_by_role("button", name="Chats", exact=True)
    drawer = page.locator("#chat-nav")
    expect(drawer).not_to_be_visible()
    chats.tap()
    expect(drawer).to_be_visible()
    expect(chats).to_have_attribute("aria-expanded", "true")
    expect(drawer.get_by_role("button", name="New chat")).to_be_focused()
    expect(drawer.get_by_label("Search chats")).to_be_visible()
    page.keyboard.press("Escape")
    expect(drawer).not_to_be_visible()
    expect(chats).to_be_focused()
    chats.tap()
    expect(drawer).to_be_visible()
    page.mouse.click(PHONE["width"] - 10, PHONE["height"] // 2)  # the dimmed page beside it
    expect(drawer).not_to_be_visible()
    expect(chats).to_have_attribute("aria-expanded", "false")

    chats.tap()
    drawer.get_by_role("button", name="New chat").tap()
    page.wait_for_url(re.compile(r".*/chats/\d+/$"))
    composer = page.locator("#composer")
    assert composer.bounding_box()["height"] < PHONE["height"] / 6  # compact
    ask(page, QUESTION)
    expect(page.locator('.turn[data-status="streaming"]')).to_have_count(1)
    # Escape closes the list; it does not also stop the answer being written.
    chats.tap()
    expect(drawer).to_be_visible()
    page.keyboard.press("Escape")
    expect(drawer).not_to_be_visible()
    # While it streams, the newest text stays above the composer.
    page.wait_for_function(
        "() => (document.querySelector('[data-answer]')?.textContent || '').length > 200"
    )
    # The page follows the text once per frame: wait for that, not for the text's arrival.
    page.wait_for_function(
        """() => {
            const answer = document.querySelector('[data-answer]');
            const composer = document.querySelector('#composer');
            return !answer || answer.getBoundingClientRect().bottom
                <= composer.getBoundingClientRect().top + 1;
        }"""
    )
    turn = wait_for_answer(page)
    expect(turn).to_have_attribute("data-status", "complete")
    assert_no_sideways_scroll(page)
    assert background_luminance(page) < 0.05
    expect(page.locator("main .chat-head h1")).to_have_text(QUESTION)

    # Tap a footnote: its passage shows in a sheet at the bottom of the screen.
    marker = turn.locator("sup.footnote-ref > a[data-claim]").first
    marker.scroll_into_view_if_needed()
    marker.tap()
    card = page.locator(".evidence-popover")
    expect(card).to_be_visible()
    expect(card.locator(".evidence-passage").first).to_be_visible()
    box = card.bounding_box()
    assert box["x"] == 0 and box["width"] == PHONE["width"]
    assert abs(box["y"] + box["height"] - PHONE["height"]) <= 1
    assert_no_sideways_scroll(page)
    page.mouse.click(10, 120)  # a tap outside puts it away
    expect(card).not_to_be_visible()

    page.set_viewport_size({"width": 320, "height": 640})  # the narrowest phone
    assert_no_sideways_scroll(page)
    assert background_luminance(page) < 0.05
    assert page.js_errors == []


WIDE_TABLE = (
    "| Quarter | Data center | Gaming | Professional visualisation | Automotive | OEM and other |\n"
    "|---|---|---|---|---|---|\n"
    "| Q1 FY26 | 39.1 billion US dollars | 3.8 billion US dollars | 509 million US dollars"
    " | 567 million US dollars | 111 million US dollars |\n"
)
THREE_BARS = {
    "type": "CHART",
    "chart_id": "c1",
    "title": "Revenue by segment",
    "chart_type": "bar",
    "data_points": 3,
    "vega_lite_spec": {
        "data": {"values": [{"s": "Data center", "v": 39.1}, {"s": "Gaming", "v": 3.8},
                            {"s": "Auto", "v": 0.6}]},
        "mark": "bar",
        "encoding": {"x": {"field": "s", "type": "nominal"},
                     "y": {"field": "v", "type": "quantitative"}},
    },
}  # fmt: skip


def chart_and_card_backgrounds(page) -> list[str]:
    """The chart's background as Vega drew it, and its turn card's."""
    return page.evaluate(
        """() => [document.querySelector('.turn figure.chart svg').style.backgroundColor,
                  getComputedStyle(document.querySelector('.turn')).backgroundColor]"""
    )


def test_on_a_phone_tables_scroll_in_their_box_and_charts_fit_and_follow_the_theme(
    phone_dark, site, analyst, upstream
):
    upstream.queue(
        Reply.events(
            {"type": "ANSWER", "content": f"Segments:\n\n{WIDE_TABLE}\nData center led."},
            THREE_BARS,
            {"type": "STRUCTURED_OUTPUT", "content": [
                {"company": "NVIDIA Corporation", "segment": "Data center and networking",
                 "revenue": "39.1 billion US dollars", "growth": "73 percent year on year"}]},
            {"type": "COMPLETE", "checkpoint_id": "k", "consumption": []},
        )
    )  # fmt: skip
    page = phone_dark
    log_in(page, site)
    page.goto(f"{site}/")
    page.locator("main").get_by_role("button", name="New chat").tap()
    page.wait_for_url(re.compile(r".*/chats/\d+/$"))
    ask(page, "Segments?")
    turn = wait_for_answer(page)
    svg = turn.locator("figure.chart .chart-view svg")
    expect(svg).to_be_visible()
    assert_no_sideways_scroll(page)

    # The tables are wider than the phone: each scrolls in its own box, reachable by keyboard.
    for table in (turn.locator(".answer table"), turn.locator(".structured-output table")):
        expect(table).to_have_attribute("tabindex", "0")
        scroll, client = table.evaluate("(t) => [t.scrollWidth, t.clientWidth]")
        assert scroll > client
    # The three bars take the answer's width, in the page's dark colours.
    chart_width = svg.bounding_box()["width"]
    answer_width = turn.locator(".answer.cited").bounding_box()["width"]
    assert chart_width >= 0.9 * answer_width
    chart, card = chart_and_card_backgrounds(page)
    assert chart == card == "rgb(27, 32, 41)"  # the dark theme's paper
    assert_accessible(page, "chat with a table and a chart (phone, dark)")

    # Choosing Light redraws the chart in the light theme's colours, without a reload.
    with page.expect_response(re.compile(r"/preferences/theme/$")):
        page.get_by_label("Theme").select_option("light")
    page.wait_for_function(
        "() => document.querySelector('.turn figure.chart svg')?.style.backgroundColor"
        " === 'rgb(255, 255, 255)'"
    )
    assert chart_and_card_backgrounds(page)[1] == "rgb(255, 255, 255)"
    assert background_luminance(page) > 0.8
    assert_accessible(page, "chat with a table and a chart (phone, light)")
    assert page.js_errors == []


def test_the_first_answer_brings_share_and_the_exports_without_a_reload(
    page, browser, site, analyst
):
    page.set_viewport_size(DESKTOP)
    log_in(page, site)
    new_chat(page)
    actions = page.get_by_role("group", name="Share and export")
    expect(actions).to_be_hidden()
    page.evaluate("() => { window.notReloaded = true; }")
    ask(page, QUESTION)
    wait_for_answer(page)

    expect(actions.get_by_role("button", name="Share", exact=True)).to_be_visible()
    for name in ("Export JSON", "Export Markdown", "Print"):
        expect(actions.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(page.locator("main .chat-head h1")).to_have_text(QUESTION)
    expect(page.locator(".chat-links a[aria-current]")).to_have_text(QUESTION)
    assert page.evaluate("() => window.notReloaded") is True

    # A rename from another tab reaches this page with its next answer.
    chat = Chat.objects.get()
    Chat.objects.filter(pk=chat.pk).update(title="Data center review")
    ask(page, "And gaming?")
    wait_for_answer(page)
    expect(page.locator("main .chat-head h1")).to_have_text("Data center review")
    expect(page.locator(".chat-links a[aria-current]")).to_have_text("Data center review")
    expect(page).to_have_title("Data center review · ResearchSite")

    page.get_by_role("button", name="Share", exact=True).click()
    link = page.get_by_label("Share link")
    expect(link).to_have_value(re.compile(rf"^{re.escape(site)}/shared/[\w-]{{32,}}/$"))
    assert page.goto(link.input_value()).status == 200
    expect(page.locator(".answer.cited").first).to_contain_text("NVIDIA")
    assert page.js_errors == []


def test_the_theme_is_kept_for_the_user_on_every_device(page, browser, site, analyst):
    log_in(page, site)  # the browser is light (Playwright's default)
    assert background_luminance(page) > 0.8
    theme = page.get_by_label("Theme")
    expect(theme).to_have_value("system")
    with page.expect_response(re.compile(r"/preferences/theme/$")) as saved:
        theme.select_option("dark")
    assert page.evaluate("() => document.documentElement.dataset.theme") == "dark"
    assert background_luminance(page) < 0.05  # at once, without a reload
    assert saved.value.ok
    assert Preference.objects.get(user=analyst).theme == "dark"

    other = open_page(browser, viewport=PHONE, scheme="light")  # another device
    try:
        log_in(other, site)
        assert background_luminance(other) < 0.05
        expect(other.get_by_label("Theme")).to_have_value("dark")
        other.get_by_label("Theme").select_option("system")  # follow the device again
        other.wait_for_function("() => !document.documentElement.dataset.theme")
        assert background_luminance(other) > 0.8
    finally:
        other.context.close()
    assert page.js_errors == []


@pytest.mark.parametrize(
    ("viewport", "scheme"),
    [(PHONE, "light"), (PHONE, "dark"), (DESKTOP, "light"), (DESKTOP, "dark")],
    ids=["phone-light", "phone-dark", "desktop-light", "desktop-dark"],
)
def test_every_page_type_has_no_axe_violation_and_fits_the_screen(
    browser, site, analyst, reviewer, viewport, scheme
):
    page = open_page(browser, viewport=viewport, scheme=scheme)
    try:
        check_every_page(page, site, viewport, scheme)
    finally:
        page.context.close()


def check_every_page(page, site: str, viewport: dict, scheme: str) -> None:
    device = "phone" if viewport is PHONE else "desktop"

    def check(what: str) -> None:
        assert_no_sideways_scroll(page)
        assert_accessible(page, f"{what} ({device}, {scheme})")

    page.goto(f"{site}/login/")
    check("login")
    log_in(page, site)
    check("chat list")
    if device == "phone":
        page.get_by_role("button", name="Chats", exact=True).click()
        check("chat list in its drawer")
        page.keyboard.press("Escape")

    page.locator("main").get_by_role("button", name="New chat").click()
    page.wait_for_url(re.compile(r".*/chats/\d+/$"))
    chat_url = page.url
    ask(page, QUESTION)
    turn = wait_for_answer(page)
    if (device, scheme) == ("desktop", "light"):
        keep_screenshot(page, "screenshot-chat.png")
    marker = turn.locator("sup.footnote-ref > a[data-claim]").first
    marker.focus()
    card = page.locator(".evidence-popover")
    expect(card).to_be_visible()
    keep_screenshot(page, f"screenshot-{device}-{scheme}.png")
    if (device, scheme) == ("desktop", "light"):
        keep_screenshot(page, "screenshot-evidence.png", around=[marker, card])
    check("chat, an evidence card open")
    page.keyboard.press("Escape")
    marker.click()
    expect(page.locator(".evidence-panel")).to_be_visible()
    check("chat, the claims panel open")
    page.get_by_role("button", name="Close").click()

    page.get_by_role("button", name="Options").click()
    expect(page.get_by_role("group", name="Question options")).to_be_visible()
    charts = page.get_by_label("Charts", exact=True)
    model = page.get_by_label("Model")
    # The Charts checkbox sits in line with its word, before it, not above it.
    box, word = charts.evaluate(
        """(box) => {
          const range = document.createRange();
          range.selectNodeContents(box.parentElement.lastChild);
          return [box.getBoundingClientRect(), range.getBoundingClientRect()]
            .map((r) => ({ left: r.left, right: r.right, middle: (r.top + r.bottom) / 2 }));
        }"""
    )
    assert box["right"] <= word["left"] and abs(box["middle"] - word["middle"]) < 4
    expect(model).to_be_visible()
    check("chat, options open")

    page.get_by_role("button", name="Share", exact=True).click()
    share_url = page.get_by_label("Share link").input_value()
    page.goto(share_url)
    check("shared page")

    page.goto(f"{site}/chats/search/?q=NVIDIA")
    expect(page.locator("main .search-hits li").first).to_be_visible()
    check("search results")

    page.goto(f"{site}/schemas/")
    check("output schemas")
    page.goto(f"{site}/workflows/")
    check("workflows")
    page.goto(f"{site}/api-tokens/")
    page.get_by_label("Name").fill("notebook")
    page.get_by_role("button", name="Create token").click()
    expect(page.get_by_label("New API token")).to_be_visible()
    check("API tokens, a new token shown")

    # A team: its page, with a member added, and the chat shared with it.
    page.get_by_role("link", name="Team").click()
    page.locator("summary", has_text="New team").click()
    page.get_by_label("Team name").fill("Desk")
    page.get_by_role("button", name="Create").click()
    page.get_by_label("Add a member (username)").fill("reviewer")
    page.get_by_role("button", name="Add", exact=True).click()
    check("team page")
    page.goto(chat_url)
    page.get_by_role("button", name="Share with team").click()
    page.wait_for_url(re.compile(r".*#team-sharing$"))
    check("chat shared with a team")

    # The admin, as a reviewer: its index and a past answer with its evidence.
    page.get_by_role("button", name="Log out").click()
    log_in(page, site, "reviewer", REVIEWER_PASSWORD)
    page.goto(chat_url)
    expect(page.get_by_role("button", name="Continue in my chats").first).to_be_visible()
    check("a team's chat, read-only")
    page.goto(f"{site}/admin/")
    check("admin")
    page.goto(f"{site}/admin/chats/turn/")
    page.get_by_role("link", name=QUESTION).click()
    expect(page.locator(".answer, .cited-answer").first).to_be_visible()
    check("admin, a past answer")
    assert page.js_errors == []
