"""The chat library in real Chromium: search, organise, share; each survives a reload."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from chats.models import Chat
from tests.browser.conftest import log_in
from tests.chats.library_factories import bigdata_source, finished_turn

COLLEAGUE_PASSWORD = "battery-staple-77"


def a_chat(owner, title: str, answer: str) -> Chat:
    chat = Chat.objects.create(owner=owner, title=title)
    finished_turn(
        chat,
        f"Tell me about {title.lower()}",
        answer,
        sources=[bigdata_source(f"doc-{title}", name="Mining Weekly", headline="Supply news")],
    )
    return chat


def submit(page, button) -> None:
    """Press a form's button and wait for the page it leads to (often the same URL again)."""
    with page.expect_navigation():
        button.click()


def chat_links(page):
    return page.locator("#chat-groups .chat-links a")


def test_search_finds_a_chat_by_a_word_of_its_answer_and_not_another_users(
    page, site, analyst, django_user_model
):
    colleague = django_user_model.objects.create_user("colleague", password=COLLEAGUE_PASSWORD)
    a_chat(colleague, "Their zirconium notes", "Zirconium demand, their view.")
    mine = a_chat(analyst, "Rare metals", "Demand for zirconium doubled in a year.")
    a_chat(analyst, "Copper", "Copper is flat.")
    log_in(page, site)

    page.keyboard.press("Control+k")
    search = page.get_by_label("Search chats")
    expect(search).to_be_focused()
    search.fill("zirconium")

    results = page.locator("#chat-search-results")
    expect(results.get_by_role("link", name="Rare metals")).to_be_visible()
    expect(results.locator("mark").first).to_have_text(re.compile("zirconium", re.I))
    expect(results).not_to_contain_text("Their zirconium")
    expect(results).not_to_contain_text("Copper")

    search.press("Enter")  # the full results page, the same results
    page.wait_for_url(re.compile(r".*/chats/search/\?q=zirconium$"))
    main = page.locator("main")
    expect(main.get_by_role("link", name="Rare metals")).to_be_visible()
    expect(main).not_to_contain_text("Their zirconium")
    main.get_by_role("link", name="Rare metals").click()
    page.wait_for_url(re.compile(rf".*/chats/{mine.pk}/$"))
    assert page.js_errors == []


def test_the_chat_list_is_navigable_by_keyboard(page, site, analyst):
    first = a_chat(analyst, "Older chat", "One.")
    a_chat(analyst, "Newer chat", "Two.")
    log_in(page, site)

    page.get_by_label("Search chats").focus()
    page.keyboard.press("ArrowDown")
    expect(chat_links(page).first).to_be_focused()
    expect(chat_links(page).first).to_have_text("Newer chat")
    page.keyboard.press("ArrowDown")
    expect(chat_links(page).nth(1)).to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf".*/chats/{first.pk}/$"))


def test_rename_pin_archive_and_delete_survive_reload(page, site, analyst):
    kept = a_chat(analyst, "Nickel", "Nickel supply is tight.")
    doomed = a_chat(analyst, "Scratch", "Nothing much.")
    log_in(page, site)
    page.goto(f"{site}/chats/{kept.pk}/")

    page.get_by_text("Rename", exact=True).click()
    title = page.get_by_label("Chat title")
    expect(title).to_be_focused()
    title.fill("Nickel supply 2026")
    page.get_by_role("button", name="Save").click()
    # Renamed in place: the heading, the tab and the chat list, without a reload.
    expect(page.locator(".chat-head h1")).to_have_text("Nickel supply 2026")
    expect(page).to_have_title("Nickel supply 2026 · ResearchSite")
    expect(chat_links(page).filter(has_text="Nickel supply 2026")).to_have_count(1)
    expect(title).to_be_hidden()  # the form folded away
    page.reload()
    expect(page.locator(".chat-head h1")).to_have_text("Nickel supply 2026")
    expect(chat_links(page).filter(has_text="Nickel supply 2026")).to_have_count(1)

    submit(page, page.get_by_role("button", name="Pin", exact=True))
    page.reload()
    expect(page.locator(".chat-group").first).to_have_text("Pinned")
    expect(page.locator(".chat-links").first.get_by_role("link")).to_have_text(
        ["Nickel supply 2026"]
    )
    expect(page.get_by_role("button", name="Unpin")).to_be_visible()

    submit(page, page.get_by_role("button", name="Archive", exact=True))
    assert page.url == f"{site}/"  # the chat list
    page.reload()
    expect(chat_links(page)).to_have_text(["Scratch"])
    page.get_by_role("link", name="Archived chats").click()
    expect(page.locator("main").get_by_role("link", name="Nickel supply 2026")).to_be_visible()
    submit(page, page.get_by_role("button", name="Unarchive Nickel supply 2026"))
    page.reload()
    expect(page.locator("main")).to_contain_text("No archived chats.")
    expect(chat_links(page).filter(has_text="Nickel supply 2026")).to_have_count(1)

    page.goto(f"{site}/chats/{doomed.pk}/")
    page.get_by_text("Delete", exact=True).click()
    expect(page.get_by_text("This cannot be undone.")).to_be_visible()
    submit(page, page.get_by_role("button", name="Delete chat"))
    assert page.url == f"{site}/"  # the chat list
    page.reload()
    expect(chat_links(page)).to_have_text(["Nickel supply 2026"])
    assert page.goto(f"{site}/chats/{doomed.pk}/").status == 404
    assert page.js_errors == []


def test_a_colleague_reads_a_shared_answer_until_sharing_stops(
    page, browser, site, analyst, django_user_model
):
    django_user_model.objects.create_user("colleague", password=COLLEAGUE_PASSWORD)
    chat = a_chat(analyst, "Lithium", "Lithium prices fell by a third.")
    log_in(page, site)
    page.goto(f"{site}/chats/{chat.pk}/")

    page.get_by_role("button", name="Share", exact=True).click()
    link = page.get_by_label("Share link")
    expect(link).to_have_value(re.compile(rf"^{re.escape(site)}/shared/[\w-]{{32,}}/$"))
    url = link.input_value()
    copy = page.locator("button[data-copy]")
    expect(copy).to_have_text("Copy")
    copy.click()
    expect(copy).not_to_have_text("Copy")  # "Copied", or how to copy when the clipboard refuses

    colleague = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
    try:
        log_in(colleague, site, "colleague", COLLEAGUE_PASSWORD)
        assert colleague.goto(url).status == 200
        answer = colleague.locator(".answer.cited")
        expect(answer).to_contain_text("Lithium prices fell by a third.")
        expect(answer.locator("sup a").first).to_be_visible()  # the footnote marker
        expect(answer).to_contain_text("Mining Weekly")  # the Sources list
        expect(colleague.get_by_label("Message")).to_have_count(0)
        expect(colleague.locator("textarea, [data-action]")).to_have_count(0)
        expect(colleague.get_by_role("button", name="Share")).to_have_count(0)

        page.get_by_role("button", name="Stop sharing").click()
        expect(page.get_by_label("Share link")).to_have_count(0)
        assert colleague.goto(url).status == 404
    finally:
        colleague.context.close()
    assert page.js_errors == []
