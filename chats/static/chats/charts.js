// Draw the agent's charts (templates/chats/_charts.html) with Vega-Lite, safely.
//
// The server already sanitised each spec (chats/answer/charts.py: inline data only, no URLs, no
// expressions); this is the second wall. The loader refuses every load, so nothing reaches the
// network whatever the spec says; expressions are interpreted from their AST (vega-interpreter),
// so no code is compiled with `new Function` and the page's CSP (script-src 'self') holds.
// A chart is moved after the answer block the server chose (data-after-block) and drawn once;
// charts added later (live frames, a finished turn's card) are found by a MutationObserver.
(() => {
  "use strict";

  if (!window.vega || !window.vegaEmbed || !window.vegaInterpreter) return;

  function refuse() {
    return Promise.reject(new Error("Charts load nothing from the network."));
  }

  function refusingLoader() {
    const loader = window.vega.loader();
    loader.load = refuse;
    loader.sanitize = refuse;
    loader.http = refuse;
    loader.file = refuse;
    return loader;
  }

  const OPTIONS = {
    mode: "vega-lite",
    renderer: "svg",
    actions: false, // our own PNG/SVG buttons: no editor link, no source view
    ast: true,
    expr: window.vegaInterpreter.expressionInterpreter,
    tooltip: false,
    defaultStyle: false, // no <style> injected into the page
    logLevel: window.vega.Error,
  };

  // After the top-level block of the answer holding the chart's end offset.
  function place(figure) {
    const block = Number(figure.dataset.afterBlock);
    const answer = figure.closest("[data-charts]")?.previousElementSibling;
    if (!Number.isInteger(block) || figure.dataset.afterBlock === undefined) return;
    if (!answer || !answer.matches(".answer")) return;
    const target = answer.children[block];
    if (target) target.after(figure);
  }

  async function draw(figure) {
    if (figure.dataset.drawn) return;
    figure.dataset.drawn = "pending";
    place(figure);
    const box = figure.querySelector("[data-chart-view]");
    if (!box) return;
    try {
      const spec = JSON.parse(box.dataset.spec);
      const result = await window.vegaEmbed(box, spec, { ...OPTIONS, loader: refusingLoader() });
      figure.dataset.drawn = "drawn";
      offerDownloads(figure, result.view);
    } catch (error) {
      figure.dataset.drawn = "failed";
      box.replaceChildren();
      const note = document.createElement("p");
      note.className = "chart-note muted";
      note.textContent = figure.dataset.failedText;
      box.after(note);
      figure.querySelector("details.chart-data")?.setAttribute("open", "");
    }
  }

  function offerDownloads(figure, view) {
    const bar = figure.querySelector("[data-chart-downloads]");
    if (!bar) return;
    bar.hidden = false;
    const name = (figure.querySelector(".chart-title")?.textContent || "chart")
      .trim().replace(/[^A-Za-z0-9]+/g, "-").replace(/^-|-$/g, "").toLowerCase() || "chart";
    bar.addEventListener("click", async (event) => {
      const kind = event.target.closest("[data-chart-download]")?.dataset.chartDownload;
      if (kind !== "png" && kind !== "svg") return;
      const link = document.createElement("a");
      link.href = await view.toImageURL(kind, kind === "png" ? 2 : 1);
      link.download = `${name}.${kind}`;
      link.click();
    });
  }

  function drawAll(root) {
    root.querySelectorAll("[data-chart]").forEach((figure) => draw(figure));
  }

  function start() {
    new MutationObserver((records) => {
      for (const record of records) {
        for (const node of record.addedNodes) {
          if (node.nodeType !== Node.ELEMENT_NODE) continue;
          if (node.matches("[data-chart]")) draw(node);
          else drawAll(node);
        }
      }
    }).observe(document.body, { childList: true, subtree: true });
    drawAll(document);
  }

  // The admin loads its media scripts in <head>, before there is a body to watch.
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
