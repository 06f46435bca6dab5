// The chat library's page behaviour: Ctrl/Cmd+K to search, results while typing, arrow keys
// through the chat list, copying a share link, printing. Everything works without it too:
// the search field is a plain GET form and every action a plain POST form.
(() => {
  "use strict";

  const search = document.getElementById("chat-search");
  const results = document.getElementById("chat-search-results");
  const groups = document.getElementById("chat-groups");

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
