// The chat page: one websocket per chat, applying the server's frames to the thread.
//
// The server owns everything that matters: it renders every card, the final cited answer and
// every label (plan steps, tool calls, statuses, titles, errors; see chats/answer/display.py and
// chats/live/protocol.py); the page's own words (banners, busy buttons) are data attributes of the
// template. This script places what it is sent, previews the streaming answer's Markdown, and
// keeps a cursor per streaming turn so a reconnect resumes exactly.
(() => {
  "use strict";

  const root = document.getElementById("chat");
  if (!root) return;

  const chatId = root.dataset.chatId;
  const thread = document.getElementById("thread");
  const composer = document.getElementById("composer");
  const message = document.getElementById("message");
  const effort = document.getElementById("effort");
  const sendButton = document.getElementById("send");
  const sendLabel = sendButton.textContent;
  const modeBox = document.getElementById("composer-mode");
  const connectionBanner = document.getElementById("connection");
  // Raw HTML off: the agent's text is shown as text; markdown-it also refuses javascript: links.
  const markdown = window.markdownit({ html: false, linkify: false });

  // 4000-4999 are the server's own closes (logged out, no such chat, too many sockets): each
  // follows an error frame that says why, and reconnecting would be refused again.
  const isFinalClose = (code) => code >= 4000 && code < 5000;
  const streams = new Map(); // turn id -> {seq, text, committed, fences, dirty}
  let newestTurnId = Number(root.dataset.newestTurnId) || 0;
  let socket = null;
  let reconnectDelay = 500;
  const outbox = []; // frames sent before the socket opened, delivered once it does
  let mode = null; // {parentTurnId} while editing a question or continuing from an answer
  let lastFrameAt = Date.now();
  const QUIET_RESYNC_MS = 15000;

  // --- Connection -------------------------------------------------------------------------

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}/ws/chats/${chatId}/`);
    socket.addEventListener("open", () => {
      reconnectDelay = 500;
      showConnection("");
      sync();
      while (outbox.length) socket.send(outbox.shift());
    });
    socket.addEventListener("message", (event) => {
      lastFrameAt = Date.now();
      handleFrame(JSON.parse(event.data));
    });
    socket.addEventListener("close", (event) => {
      if (isFinalClose(event.code)) {
        if (connectionBanner.hidden) showConnection(connectionBanner.dataset.closedText);
        return;
      }
      showConnection(connectionBanner.dataset.lostText);
      setTimeout(connect, reconnectDelay);
      reconnectDelay = Math.min(reconnectDelay * 2, 10000);
    });
  }

  function send(frame) {
    const text = JSON.stringify(frame);
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(text);
    else outbox.push(text); // a question asked while (re)connecting is not lost
    return true;
  }

  // Ask for whatever this page has not seen: events after each streaming turn's cursor, and
  // turns newer than the newest one on the page. A finished turn whose cited pages were still
  // being read is asked for again: the server answers with its card as it is now.
  function sync() {
    const cursors = {};
    for (const card of thread.querySelectorAll('.turn[data-status="streaming"]')) {
      cursors[card.dataset.turnId] = streamFor(card.dataset.turnId).seq;
    }
    for (const summary of thread.querySelectorAll(".turn .claim-summary-pending")) {
      const card = summary.closest(".turn");
      if (card.dataset.status !== "streaming") cursors[card.dataset.turnId] = 0;
    }
    send({ type: "sync", cursors, newest_turn_id: newestTurnId });
  }

  // The server titles a chat after its first question, and a rename may come from another
  // tab: show the title the frame carries in the heading, the tab and the chat list.
  function showTitle(frame) {
    if (frame.chat_title) window.site.showChatTitle(frame.chat_title, frame.page_title);
  }

  function showConnection(text) {
    connectionBanner.textContent = text;
    connectionBanner.hidden = !text;
  }

  // --- Frames from the server -------------------------------------------------------------

  function handleFrame(frame) {
    switch (frame.type) {
      case "turn.started": return onTurnStarted(frame);
      case "turn.events": return onTurnEvents(frame);
      case "turn.notice": return setLiveStatus(frame.turn_id, frame.label);
      case "turn.finished": return onTurnFinished(frame);
      case "turn.checked": return onTurnChecked(frame);
      case "error": releaseReruns(); return showConnection(frame.message);
    }
  }

  // A refused re-run (a limit, say) gives its button back; a started one replaces its card.
  function releaseReruns() {
    for (const button of thread.querySelectorAll('[data-action="rerun"]:disabled')) {
      button.disabled = false;
      button.textContent = button.dataset.idleLabel;
    }
  }

  function onTurnStarted(frame) {
    newestTurnId = Math.max(newestTurnId, frame.turn_id);
    if (cardFor(frame.turn_id)) return;
    // A new turn shows the branch it is on: drop the cards after its parent.
    const parent = frame.parent_id ? cardFor(frame.parent_id) : null;
    if (frame.parent_id && !parent) return; // started on a branch this page is not showing
    const cards = [...thread.querySelectorAll(".turn")];
    const keep = parent ? cards.indexOf(parent) + 1 : 0;
    cards.slice(keep).forEach((card) => card.remove());
    thread.querySelector(".empty-hint")?.remove();
    thread.insertAdjacentHTML("beforeend", frame.html);
    showTitle(frame);
    scrollToBottom(); // the new card is the last thing on the page, above the composer
    updateComposer();
  }

  function onTurnEvents(frame) {
    const card = cardFor(frame.turn_id);
    if (!card || card.dataset.status !== "streaming") return;
    const stream = streamFor(frame.turn_id);
    for (const event of frame.events) {
      if (event.seq <= stream.seq) continue; // already applied
      if (event.seq !== stream.seq + 1) { sync(); return; } // a gap: ask the log for it
      applyEvent(card, stream, event);
      stream.seq = event.seq;
    }
    scheduleRender(card, stream);
  }

  // While the reader is at the end of the page, keep the newest text in view as it streams in
  // (the composer is sticky at the bottom and would otherwise cover it); once they scroll up
  // to read, leave them there.
  function isAtBottom() {
    const page = document.scrollingElement;
    return page.scrollHeight - page.scrollTop - page.clientHeight < 48;
  }

  function scrollToBottom() {
    const page = document.scrollingElement;
    page.scrollTop = page.scrollHeight;
  }

  function onTurnFinished(frame) {
    const card = cardFor(frame.turn_id);
    streams.delete(String(frame.turn_id));
    if (card) {
      const following = isAtBottom();
      card.outerHTML = frame.html; // the server's cited answer replaces the preview
      if (following) scrollToBottom();
    }
    showTitle(frame);
    // The chat has an answer now: Share and the exports apply (rendered hidden until then).
    for (const group of document.querySelectorAll("[data-needs-answer][hidden]")) group.hidden = false;
    updateComposer();
  }

  // A finished turn's answer again, its claims checked against the pages they cite: the rest
  // of its card is as turn.finished left it.
  function onTurnChecked(frame) {
    const card = cardFor(frame.turn_id);
    if (!card || card.dataset.status === "streaming") return;
    const answer = card.querySelector(":scope > .answer.cited");
    if (answer) answer.innerHTML = frame.answer_html; // sanitised by the server, as the card is
  }

  // Each field of an event view says what to do with it (chats/live/protocol.py, EventView).
  function applyEvent(card, stream, event) {
    if (event.plan_html !== undefined) {
      const box = card.querySelector("[data-plan]");
      box.innerHTML = event.plan_html; // rendered and escaped by the server; replaces the last
      box.hidden = false;
    }
    if (event.activity) addActivity(card, event.activity.text, event.activity.kind);
    if (event.chart_html !== undefined) {
      // rendered and escaped by the server; charts.js draws it as soon as it is in the page
      card.querySelector("[data-live-charts]")?.insertAdjacentHTML("beforeend", event.chart_html);
    }
    if (event.content) {
      stream.text += event.content;
      stream.dirty = true;
    }
    if (event.alert) {
      const banner = document.createElement("p");
      banner.className = "banner error";
      banner.setAttribute("role", "alert");
      banner.textContent = event.alert;
      card.querySelector("[data-live]").append(banner);
    }
    if (event.status) setLiveStatus(card.dataset.turnId, event.status);
  }

  function addActivity(card, label, kind) {
    const item = document.createElement("li");
    item.className = kind;
    item.textContent = label;
    card.querySelector("[data-activity]").append(item);
  }

  function setLiveStatus(turnId, text) {
    const status = cardFor(turnId)?.querySelector("[data-live-status]");
    if (status) status.textContent = text;
  }

  // --- Answer preview ---------------------------------------------------------------------
  // Render at most once per animation frame, and only the open block: paragraphs before the
  // last blank line (outside a code fence) are rendered once and kept.

  function scheduleRender(card, stream) {
    if (!stream.dirty || stream.scheduled) return;
    stream.scheduled = true;
    requestAnimationFrame(() => {
      stream.scheduled = false;
      stream.dirty = false;
      const following = isAtBottom();
      renderPreview(card, stream);
      if (following) scrollToBottom();
    });
  }

  function renderPreview(card, stream) {
    const box = card.querySelector("[data-answer]");
    if (!box) return;
    if (!box.firstChild) box.innerHTML = '<div class="committed"></div><div class="open"></div>';
    const boundary = stream.text.lastIndexOf("\n\n");
    if (boundary > stream.committed) {
      const block = stream.text.slice(stream.committed, boundary);
      const fences = (block.match(/^\s*(```|~~~)/gm) || []).length;
      if ((stream.fences + fences) % 2 === 0) {
        box.firstChild.insertAdjacentHTML("beforeend", markdown.render(block));
        stream.committed = boundary;
        stream.fences += fences;
      }
    }
    box.lastChild.innerHTML = markdown.render(stream.text.slice(stream.committed));
  }

  // --- Composer and turn actions ----------------------------------------------------------

  function ask(extra) {
    const options = window.questionOptions; // options.js: the composer's Options panel
    if (options && !options.check()) return false;
    const withOptions = options ? { options: options.current() } : {};
    return send({ type: "ask", research_effort: effort.value, ...withOptions, ...extra });
  }

  composer.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = message.value;
    if (!text.trim() || sendButton.disabled) return;
    const frame = { message: text };
    if (mode) frame.parent_turn_id = mode.parentTurnId;
    if (ask(frame)) {
      message.value = "";
      setMode(null);
    }
  });

  // Escape stops a streaming answer (the search field and evidence cards handle their own).
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || event.defaultPrevented) return;
    const stop = thread.querySelector('.turn[data-status="streaming"] [data-action="stop"]');
    if (stop) stop.click();
  });

  message.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      composer.requestSubmit();
    }
  });

  modeBox.querySelector('[data-action="cancel-mode"]').addEventListener("click", () => setMode(null));

  thread.addEventListener("click", (event) => {
    const button = event.target.closest("button");
    const card = button?.closest(".turn");
    if (!button || !card) return;
    const turnId = Number(card.dataset.turnId);
    const parentTurnId = card.dataset.parentId ? Number(card.dataset.parentId) : null;
    const question = card.querySelector("[data-question]").textContent;
    if (button.dataset.branchTo) return switchBranch(button.dataset.branchTo);
    switch (button.dataset.action) {
      case "stop":
        if (send({ type: "stop", turn_id: turnId })) {
          button.disabled = true;
          button.textContent = button.dataset.busyLabel;
        }
        return;
      case "edit":
        message.value = question;
        setMode({ parentTurnId }, button.dataset.modeText);
        return;
      case "continue":
        setMode({ parentTurnId: turnId }, button.dataset.modeText);
        return;
      case "rerun": // the same question and options, as a new version (chats/run/rerun.py)
        if (send({ type: "rerun", turn_id: turnId })) {
          button.dataset.idleLabel = button.textContent;
          button.disabled = true;
          button.textContent = button.dataset.busyLabel;
        }
        return;
      case "retry":
        ask({ message: question, research_effort: card.dataset.effort, parent_turn_id: parentTurnId });
        return;
      case "restart":
        ask({ message: question, research_effort: card.dataset.effort, parent_turn_id: parentTurnId, restart: true });
        return;
      case "copy":
        return copyAnswer(button);
      case "continue-mine": // a chat shared with the reader's team: go on in one of their own
        return continueInMyChats(button);
    }
  });

  async function continueInMyChats(button) {
    button.disabled = true;
    const reply = await window.site.postForm(button.dataset.url, new URLSearchParams());
    if (reply?.url) location.assign(reply.url);
    else {
      button.disabled = false;
      showConnection(connectionBanner.dataset.continueFailedText);
    }
  }

  // Copy the cited answer as Markdown with its footnotes, as the server renders it.
  async function copyAnswer(button) {
    const label = button.textContent;
    try {
      const response = await fetch(button.dataset.copyUrl, { credentials: "same-origin" });
      if (!response.ok) throw new Error(String(response.status));
      await navigator.clipboard.writeText(await response.text());
      button.textContent = button.dataset.doneLabel;
    } catch (error) {
      button.textContent = button.dataset.failedLabel;
    }
    setTimeout(() => { button.textContent = label; }, 2000);
  }

  function setMode(newMode, text) {
    mode = newMode;
    modeBox.hidden = !newMode;
    modeBox.querySelector("span").textContent = text || "";
    if (newMode) message.focus();
  }

  async function switchBranch(turnId) {
    const switched = await window.site.postForm(root.dataset.branchUrl, new URLSearchParams({ turn_id: turnId }));
    if (switched) location.reload();
    else showConnection(connectionBanner.dataset.switchFailedText);
  }

  function updateComposer() {
    const streaming = thread.querySelector('.turn[data-status="streaming"]');
    sendButton.disabled = Boolean(streaming);
    sendButton.textContent = streaming ? sendButton.dataset.busyLabel : sendLabel;
  }

  // --- Helpers ----------------------------------------------------------------------------

  function cardFor(turnId) {
    return document.getElementById(`turn-${turnId}`);
  }

  function streamFor(turnId) {
    const key = String(turnId);
    if (!streams.has(key)) streams.set(key, { seq: 0, text: "", committed: 0, fences: 0 });
    return streams.get(key);
  }

  // A frame can be lost (a full channel on a slow page): if a streaming turn has been quiet
  // for a while, ask the server where it stands. Sync is idempotent, so this is always safe.
  setInterval(() => {
    const streaming = thread.querySelector('.turn[data-status="streaming"]');
    if (streaming && Date.now() - lastFrameAt > QUIET_RESYNC_MS && socket?.readyState === WebSocket.OPEN) {
      lastFrameAt = Date.now();
      sync();
    }
  }, 5000);

  updateComposer();
  connect();
})();
