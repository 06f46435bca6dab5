// The composer's question options: a panel behind the "Options" button whose values travel
// with every `ask` frame (chats/agent/options.py checks them and remembers them on the chat).
// chat.js asks `window.questionOptions.current()` for them; the server sends only what is set.
(() => {
  "use strict";

  const toggle = document.getElementById("options-toggle");
  const panel = document.getElementById("question-options");
  if (!toggle || !panel) return;
  const error = panel.querySelector(".options-error");

  toggle.addEventListener("click", () => {
    panel.hidden = !panel.hidden;
    toggle.setAttribute("aria-expanded", String(!panel.hidden));
  });

  function current() {
    const options = {};
    for (const field of panel.querySelectorAll("[data-option]")) {
      const name = field.dataset.option;
      if (field.type === "checkbox") {
        if (field.checked) options[name] = true;
      } else if ("list" in field.dataset) {
        const names = field.value.split(",").map((s) => s.trim()).filter(Boolean);
        if (names.length) options[name] = names;
      } else if ("number" in field.dataset) {
        if (field.value !== "") options[name] = Number(field.value);
      } else if (field.value.trim() !== "") {
        options[name] = field.value.trim();
      }
    }
    return options;
  }

  function check() {
    const start = panel.querySelector('[data-option="period_start"]').value;
    const end = panel.querySelector('[data-option="period_end"]').value;
    const bad = start && end && start > end;
    error.textContent = bad ? error.dataset.dateOrderText : "";
    error.hidden = !bad;
    return !bad;
  }
  panel.addEventListener("change", check);

  window.questionOptions = { current, check };
})();
