// Evidence cards for cited answers (chat page, shared pages, admin).
// Hovering, focusing or tapping a footnote marker shows what its source says in support of
// the claim; clicking it lists every claim of the answer that cites that source. The cards
// are rendered, sanitised and hidden in the answer by the server (citations/render_html.py);
// this script only moves copies of them into view. It never builds HTML from strings.
(function () {
  "use strict";

  const card = document.createElement("div");
  card.className = "evidence-popover";
  card.setAttribute("role", "tooltip");
  card.id = "evidence-popover";
  card.hidden = true;

  const panel = document.createElement("aside");
  panel.className = "evidence-panel";
  panel.setAttribute("aria-label", "Claims citing this source");
  panel.hidden = true;

  let lastPointer = "mouse";
  let hideTimer = null;
  let shownFor = null;
  let tappedShown = false; // the tapped marker's card was already showing before the tap
  // On narrow screens the card is a bottom sheet (evidence.css), not placed by its marker.
  const sheet = window.matchMedia("(max-width: 720px)");

  function markerOf(target) {
    return target instanceof Element ? target.closest("sup.footnote-ref > a[data-claim]") : null;
  }

  // The answer's hidden evidence store, the claim and the source a marker points to.
  function evidenceFor(marker) {
    const match = /^#fn-(.+)-(\d+)$/.exec(marker.getAttribute("href") || "");
    if (!match) return null;
    const [, doc, number] = match;
    const store = [...document.querySelectorAll("div.evidence")].find((s) => s.dataset.doc === doc);
    if (!store) return null;
    const claim = store.querySelector(`.evidence-claim[data-claim="${marker.dataset.claim}"]`);
    const source = claim && claim.querySelector(`.evidence-source[data-source="${number}"]`);
    return source ? { store, claim, source, number } : null;
  }

  function showCard(marker) {
    const found = evidenceFor(marker);
    if (!found) return;
    clearTimeout(hideTimer);
    const check = found.claim.querySelector(".evidence-check");
    card.replaceChildren(
      ...(check ? [check.cloneNode(true)] : []),
      found.source.cloneNode(true),
    );
    card.hidden = false;
    shownFor = marker;
    marker.setAttribute("aria-describedby", card.id);
    if (sheet.matches) {
      card.style.left = card.style.top = card.style.width = "";
      return;
    }
    const box = marker.getBoundingClientRect();
    const width = Math.min(448, document.documentElement.clientWidth - 16);
    const left = Math.max(8, Math.min(box.left, document.documentElement.clientWidth - width - 8));
    card.style.width = `${width}px`;
    card.style.left = `${left + window.scrollX}px`;
    card.style.top = `${box.bottom + window.scrollY + 6}px`;
  }

  function hideCard() {
    card.hidden = true;
    if (shownFor) shownFor.removeAttribute("aria-describedby");
    shownFor = null;
  }

  function hideSoon() {
    clearTimeout(hideTimer);
    hideTimer = setTimeout(hideCard, 250);
  }

  function openPanel(marker) {
    const found = evidenceFor(marker);
    if (!found) return;
    const heading = document.createElement("h2");
    heading.textContent = found.source.querySelector(".evidence-label").textContent;
    const close = document.createElement("button");
    close.type = "button";
    close.className = "evidence-panel-close";
    close.textContent = "Close";
    close.addEventListener("click", closePanel);
    const list = document.createElement("ol");
    for (const claim of found.store.querySelectorAll(".evidence-claim")) {
      const source = claim.querySelector(`.evidence-source[data-source="${found.number}"]`);
      if (!source) continue;
      const item = document.createElement("li");
      const text = claim.querySelector(".evidence-claim-text");
      const check = claim.querySelector(".evidence-check");
      item.append(text.cloneNode(true));
      if (check) item.append(check.cloneNode(true));
      for (const passage of source.querySelectorAll(".evidence-origin, .evidence-passage, .evidence-none")) {
        item.append(passage.cloneNode(true));
      }
      list.append(item);
    }
    panel.replaceChildren(close, heading, list);
    panel.hidden = false;
    close.focus();
  }

  function closePanel() {
    panel.hidden = true;
  }

  document.addEventListener("pointerdown", (event) => {
    lastPointer = event.pointerType || "mouse";
    const marker = markerOf(event.target);
    // A touch's emulated mouseover shows the card before its click: remember whether it was
    // showing already, so that the first tap shows the card and a second opens the panel.
    tappedShown = Boolean(marker) && shownFor === marker && !card.hidden;
    // A tap outside the card (and outside any marker) puts it away: on a phone it covers the
    // bottom of the screen.
    if (!marker && !card.hidden && !(event.target instanceof Element && event.target.closest(".evidence-popover"))) {
      hideCard();
    }
  });
  document.addEventListener("mouseover", (event) => {
    const marker = markerOf(event.target);
    if (marker) showCard(marker);
    else if (event.target instanceof Element && event.target.closest(".evidence-popover")) {
      clearTimeout(hideTimer);
    }
  });
  document.addEventListener("mouseout", (event) => {
    if (markerOf(event.target) || (event.target instanceof Element && event.target.closest(".evidence-popover"))) {
      hideSoon();
    }
  });
  document.addEventListener("focusin", (event) => {
    const marker = markerOf(event.target);
    if (marker) showCard(marker);
  });
  document.addEventListener("focusout", (event) => {
    if (markerOf(event.target)) hideSoon();
  });
  document.addEventListener("click", (event) => {
    const marker = markerOf(event.target);
    if (!marker) return;
    event.preventDefault();
    if (lastPointer === "touch" && !tappedShown) showCard(marker);
    else openPanel(marker);
  });
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    if (!card.hidden || !panel.hidden) {
      hideCard();
      closePanel();
      event.preventDefault();  // Escape closes the card, it does not also stop an answer
      event.stopPropagation();
    }
  }, true);

  function mount() {
    // Inside the page's main landmark, so that assistive technology finds them with the answer.
    (document.querySelector("main") || document.body).append(card, panel);
  }
  if (document.body) mount();
  else document.addEventListener("DOMContentLoaded", mount);
})();
