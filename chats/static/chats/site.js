// Behaviour every page shares: what the page scripts share (posting a form, showing a chat's
// title), the "Theme" choice in the header, and tables wider than the screen that scroll in
// their own box. Loaded (deferred) before every other page script, which use `window.site`.
(() => {
  "use strict";

  // --- Shared by the page scripts ----------------------------------------------------------

  // POST a form's fields (FormData, or URLSearchParams) as the page's own request, asking for
  // JSON (chats/form_replies.py). Returns the answer's JSON, or null when the post failed: the
  // caller then posts the plain form, whose page says what went wrong, or says so itself.
  async function postForm(url, fields) {
    const response = await fetch(url, {
      method: "POST",
      body: fields,
      headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
      credentials: "same-origin",
    }).catch(() => null);
    return response?.ok ? response.json().catch(() => null) : null;
  }

  function csrfToken() {
    const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  // A chat's title as the server words it (renamed here or in another tab, or named after its
  // first question): in the heading, the tab, the chat list and the Rename field, unless that
  // field is being edited.
  function showChatTitle(title, pageTitle) {
    const heading = document.querySelector("main .chat-head h1");
    if (heading) heading.textContent = title;
    const link = document.querySelector(".chat-links a[aria-current]");
    if (link) link.textContent = title;
    const field = document.getElementById("chat-title"); // the Rename form
    if (field && document.activeElement !== field) field.value = title;
    document.title = pageTitle;
  }

  window.site = { postForm, showChatTitle };

  // --- Theme: applied at once, kept on the server for the user (chats/preferences.py) ------
  // Without this script the form's Save button posts the same choice and reloads.
  const form = document.querySelector(".theme-form");
  if (form) {
    const select = form.elements.theme;
    form.querySelector("[data-theme-save]").hidden = true;
    select.addEventListener("change", async () => {
      const theme = select.value;
      const root = document.documentElement;
      if (theme === "system") delete root.dataset.theme;
      else root.dataset.theme = theme;
      document.querySelector('meta[name="color-scheme"]')?.setAttribute(
        "content", theme === "system" ? "light dark" : theme);
      document.dispatchEvent(new CustomEvent("themechange")); // charts.js redraws in it
      if (!(await postForm(form.action, new FormData(form)))) form.submit();
    });
  }

  // --- Tables scroll inside their own box (site.css); one that does is a tab stop, so that
  // keyboard users can scroll it too (WCAG 2.1.1).
  const TABLES = ".answer table, .structured-output table, .chart-data table";
  function markScrollable() {
    for (const table of document.querySelectorAll(TABLES)) {
      const scrolls = table.scrollWidth > table.clientWidth + 1;
      if (scrolls && !table.hasAttribute("tabindex")) table.tabIndex = 0;
      else if (!scrolls && table.getAttribute("tabindex") === "0") table.removeAttribute("tabindex");
    }
  }
  let pending = false;
  const soon = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; markScrollable(); });
  };
  function start() {
    markScrollable();
    window.addEventListener("resize", soon);
    new MutationObserver(soon).observe(document.body, { childList: true, subtree: true });
    document.addEventListener("toggle", soon, true); // a <details> holding a table opened
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
