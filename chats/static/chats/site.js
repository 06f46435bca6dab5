// Behaviour every page shares: the "Theme" choice in the header, and tables wider than the
// screen that scroll in their own box.
(() => {
  "use strict";

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
      const response = await fetch(form.action, {
        method: "POST",
        body: new FormData(form), // carries the form's CSRF token
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      }).catch(() => null);
      if (!response || !response.ok) form.submit(); // the plain form says what went wrong
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
