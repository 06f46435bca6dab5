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

  const drawn = new Map(); // figure -> its vega-embed result, to redraw it in a new theme

  // Charts take the answer's width unless their spec sets one; composite views (facet,
  // concat, repeat) size their own cells.
  const COMPOSITE = ["facet", "concat", "hconcat", "vconcat", "repeat"];
  function sized(spec) {
    if (!spec || typeof spec !== "object" || "width" in spec) return spec;
    if (COMPOSITE.some((key) => key in spec)) return spec;
    return { ...spec, width: "container" };
  }

  // A Vega-Lite config in the page's own colours (site.css), so a chart matches the theme it
  // is drawn in: read from the chart's box, where the page's colour variables resolve.
  function themed(box) {
    const probe = document.createElement("span");
    box.append(probe);
    const colour = (name) => {
      probe.style.color = `var(${name})`;
      return getComputedStyle(probe).color;
    };
    const ink = getComputedStyle(box).color;
    const [muted, line, paper] = [colour("--muted"), colour("--line"), colour("--paper")];
    probe.remove();
    const dark = document.documentElement.dataset.theme === "dark" ||
      (!document.documentElement.dataset.theme && window.matchMedia("(prefers-color-scheme: dark)").matches);
    return {
      theme: dark ? "dark" : undefined, // vega-themes' dark palette for the marks
      config: {
        background: paper,
        view: { stroke: line },
        title: { color: ink, subtitleColor: muted },
        axis: { domainColor: muted, tickColor: muted, gridColor: line, labelColor: muted, titleColor: ink },
        legend: { labelColor: muted, titleColor: ink },
        header: { labelColor: muted, titleColor: ink },
      },
    };
  }

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
      const spec = sized(JSON.parse(box.dataset.spec));
      const result = await window.vegaEmbed(box, spec, { ...OPTIONS, ...themed(box), loader: refusingLoader() });
      figure.dataset.drawn = "drawn";
      drawn.set(figure, result);
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

  // A theme change (site.js, or the system's when the user follows it) redraws every chart.
  function redrawAll() {
    for (const [figure, result] of drawn) {
      drawn.delete(figure);
      result.finalize();
      delete figure.dataset.drawn;
      if (figure.isConnected) draw(figure);
    }
  }

  function offerDownloads(figure, view) {
    const bar = figure.querySelector("[data-chart-downloads]");
    if (!bar) return;
    bar.hidden = false;
    bar.view = view; // the latest drawing: a redraw replaces it
    if (bar.dataset.ready) return;
    bar.dataset.ready = "1";
    const name = (figure.querySelector(".chart-title")?.textContent || "chart")
      .trim().replace(/[^A-Za-z0-9]+/g, "-").replace(/^-|-$/g, "").toLowerCase() || "chart";
    bar.addEventListener("click", async (event) => {
      const kind = event.target.closest("[data-chart-download]")?.dataset.chartDownload;
      if (kind !== "png" && kind !== "svg") return;
      const link = document.createElement("a");
      link.href = await bar.view.toImageURL(kind, kind === "png" ? 2 : 1);
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
    document.addEventListener("themechange", redrawAll);
    window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => {
      if (!document.documentElement.dataset.theme) redrawAll();
    });
  }

  // The admin loads its media scripts in <head>, before there is a body to watch.
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
