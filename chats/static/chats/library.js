// The chat library's page behaviour: the chat list as a drawer on narrow screens, Ctrl/Cmd+K
// to search, results while typing, arrow keys through the chat list, renaming in place,
// copying a share link, printing. The actions work without it too: the search field is a
// plain GET form and every action a plain POST form.
(() => {
  "use strict";

  const search = document.getElementById("chat-search");
  const results = document.getElementById("chat-search-results");
  const groups = document.getElementById("chat-groups");

  // --- The chat list as a drawer (narrow screens; site.css) --------------------------------
  // The "Chats" button opens it; Escape, a tap outside it or the button again close it. While
  // it is open the rest of the page is inert, so focus and screen readers stay in the list;
  // closing gives focus back to the button.
  const nav = document.getElementById("chat-nav");
  const toggle = document.querySelector("[data-drawer-toggle]");
  const narrow = window.matchMedia("(max-width: 720px)");
  if (nav && toggle) {
    const backdrop = document.createElement("div");
    backdrop.className = "drawer-backdrop";
    backdrop.hidden = true;
    nav.after(backdrop);
    const outside = () => [document.querySelector(".site-header"), ...nav.parentElement.querySelectorAll(":scope > main")];

    const isOpen = () => nav.classList.contains("open");
    const setOpen = (open, { restoreFocus = true } = {}) => {
      nav.classList.toggle("open", open);
      backdrop.hidden = !open;
      toggle.setAttribute("aria-expanded", String(open));
      // The first control, not the search field: focusing a field would open a phone's keyboard.
      if (open) nav.querySelector("a[href], button, select, input:not([type=hidden])")?.focus();
      for (const el of outside()) if (el) el.inert = open;
      if (!open && restoreFocus) toggle.focus();
    };
    toggle.addEventListener("click", () => setOpen(!isOpen()));
    backdrop.addEventListener("click", () => setOpen(false));
    // Captured, so that it runs before the chat page's Escape (which stops a streaming answer);
    // Escape in a search field with words clears it first (below).
    document.addEventListener("keydown", (event) => {
      if (event.key !== "Escape" || !isOpen() || (event.target === search && search.value)) return;
      event.preventDefault(); // closing the drawer is all this Escape does
      event.stopPropagation();
      setOpen(false);
    }, true);
    // Widening the window turns the drawer back into the sidebar.
    narrow.addEventListener("change", () => { if (!narrow.matches && isOpen()) setOpen(false, { restoreFocus: false }); });
  }

  // --- Ctrl/Cmd+K focuses the search field -----------------------------------------------
  document.addEventListener("keydown", (event) => {
    if (search && (event.ctrlKey || event.metaKey) && event.key.toLowerCase() === "k") {
      event.preventDefault();
      search.focus();
      search.select();
    }
  });

  // --- Results while typing (the server renders them; this only swaps them in) -----------
  if (search && results && groups) {
    let timer = null;
    let asked = 0;
    search.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(showResults, 150);
    });
    search.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && search.value) {
        event.preventDefault(); // clearing the search is all this Escape does
        search.value = "";
        showResults();
      } else if (event.key === "ArrowDown") {
        const first = visibleLinks()[0];
        if (first) { event.preventDefault(); first.focus(); }
      }
    });

    async function showResults() {
      const query = search.value.trim();
      const ask = ++asked;
      if (!query) {
        results.hidden = true;
        results.replaceChildren();
        groups.hidden = false;
        return;
      }
      const url = `${search.dataset.fragmentUrl}?fragment=1&q=${encodeURIComponent(query)}`;
      const response = await fetch(url, { credentials: "same-origin" });
      if (ask !== asked || !response.ok) return; // a newer query is on its way
      results.innerHTML = await response.text(); // our own escaped fragment
      results.hidden = false;
      groups.hidden = true;
    }
  }

  // --- Arrow keys move through the chat list (Tab works too, Enter opens) -----------------
  function visibleLinks() {
    return [...document.querySelectorAll(".chat-nav .chat-links a, main .chat-links a")]
      .filter((link) => link.offsetParent !== null);
  }

  document.addEventListener("keydown", (event) => {
    if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
    const links = visibleLinks();
    const index = links.indexOf(event.target); // not activeElement: the search field may have moved it
    if (index < 0) return;
    event.preventDefault();
    const next = index + (event.key === "ArrowDown" ? 1 : -1);
    if (next < 0) { if (search) search.focus(); return; }
    links[Math.min(next, links.length - 1)].focus();
  });

  // --- Rename: focus the title when the form opens ----------------------------------------
  for (const details of document.querySelectorAll("details.inline-form")) {
    details.addEventListener("toggle", () => {
      const field = details.querySelector("input:not([type=hidden]), button[type=submit]");
      if (details.open && field) field.focus();
    });
  }

  // --- Rename in place: the heading, the tab and the chat list show the new title ---------
  const rename = document.getElementById("chat-title")?.form;
  if (rename) {
    rename.addEventListener("submit", async (event) => {
      event.preventDefault();
      const renamed = await window.site.postForm(rename.action, new FormData(rename));
      if (!renamed) { rename.submit(); return; } // let the server's page say what is wrong
      rename.closest("details").open = false;
      window.site.showChatTitle(renamed.title, renamed.page_title);
    });
  }

  // --- Copy the share link ---------------------------------------------------------------
  for (const button of document.querySelectorAll("[data-copy]")) {
    button.addEventListener("click", async () => {
      const field = document.getElementById(button.dataset.copy);
      field.select();
      try {
        await navigator.clipboard.writeText(field.value);
        button.textContent = "Copied";
      } catch {
        button.textContent = "Press Ctrl+C to copy"; // clipboard refused (http, permissions)
      }
    });
  }

  // --- Print ------------------------------------------------------------------------------
  for (const button of document.querySelectorAll("[data-print]")) {
    button.addEventListener("click", () => window.print());
  }
})();
