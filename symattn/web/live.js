/* symattn serve: what the page shows beside the derivation, drawn from each render answer.
 *
 * The heatmap and the token diagram are the handouts' own SVG (the answer's "figures"); hovering a cell
 * or a line shows its closed form and value from the answer's compute data (nothing is computed here).
 * Every step's heading gets a "copy as LaTeX" button; the LaTeX is the server's, asked for on the first
 * press (POST /api/render with "latex_steps": one per <h2>, of the spec that answer shows). app.js
 * announces each answer, with its spec, by the event "symattn:rendered".
 */
"use strict";
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  let last = null; // the last answer shown

  function page() { return window.symattnPage; }

  function weightsOf(compute, head) {
    // the weights (and exp sums) of one head, from compute's data of any model kind
    let c = compute || {};
    if (c.values) c = c.values;
    if (Array.isArray(c.heads)) c = c.heads[head - 1] || {};
    return {weights: c.weights, sums: c.exp_sum, tokens: compute.tokens || (compute.values || {}).tokens,
      keys: compute.key_tokens || compute.tokens || (compute.values || {}).tokens};
  }

  function titleOf(data, head, row, col) {
    const {weights, sums, tokens, keys} = weightsOf(data.compute, head);
    if (!weights || !weights.exact || !weights.value[row]) return null;
    const ui = page().ui;
    const name = `A[${tokens[row]}, ${keys[col]}]`;
    const exact = weights.exact[row][col];
    const lines = [ui("cell_title", {name, exact, value: weights.value[row][col]})];
    // the closed form names its row's sum s_i: say what that is
    const sum = sums && sums.exact && sums.name ? sums.name[row] : null;
    if (sum && new RegExp(`\\b${sum}\\b`).test(exact)) lines.push(ui("sum_title", {name: sum, exact: sums.exact[row]}));
    return lines.join("\n");
  }

  function addTitle(node, text) {
    if (text === null) return;
    const title = document.createElementNS(SVG, "title");
    title.setAttribute("class", "hover");
    title.textContent = text;
    node.prepend(title);
  }

  function drawFigures(data) {
    const box = document.getElementById("figures");
    const figures = data.figures || [];
    box.hidden = !figures.length;
    const shown = [];
    for (const figure of figures) {
      const holder = document.createElement("div");
      holder.className = "figure " + figure.kind;
      holder.dataset.figure = figure.id;
      holder.innerHTML = figure.svg; // the server's own SVG: every text in it escaped by its template
      shown.push(holder);
    }
    box.replaceChildren(document.getElementById("figures-label"), ...shown);
    titleFigures(data);
  }

  function titleFigures(data) {
    for (const node of document.querySelectorAll("#figures title.hover")) node.remove();
    // the weights' heatmap and the token diagram (not the heatmap of dZ: its cells are other numbers)
    for (const panel of document.querySelectorAll('#figures [data-figure="weights"] g.panel')) {
      const head = Number(panel.dataset.head);
      for (const cell of panel.querySelectorAll("rect.cell")) {
        addTitle(cell, titleOf(data, head, Number(cell.dataset.row), Number(cell.dataset.col)));
      }
    }
    const row = page().focusIndex(); // the diagram draws the focus row
    for (const panel of document.querySelectorAll('#figures [data-figure="tokens"] g.panel')) {
      const head = Number(panel.dataset.head);
      for (const line of panel.querySelectorAll("line.weight")) addTitle(line, titleOf(data, head, row, Number(line.dataset.key)));
    }
  }

  function copyButtons(data) {
    const steps = data.step_kinds || [];
    const headings = document.querySelectorAll("#derivation > h2");
    if (headings.length !== steps.length) return; // never a wrong step's LaTeX
    const ui = page().ui;
    headings.forEach((heading, i) => {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "copy-latex";
      button.dataset.step = String(i);
      button.textContent = ui("copy_latex");
      button.setAttribute("aria-label", ui("copy_latex_of", {heading: heading.textContent.trim()}));
      heading.after(button);
    });
  }

  async function latexSteps(answer) {
    if (!answer.latex) {
      answer.latex = page().post("/api/render", {spec: answer.spec, format: "html", compute: false, latex_steps: true})
        .then(({ok, data}) => (ok ? data.latex_steps : Promise.reject(new Error(data ? data.error : page().ui("offline")))));
      answer.latex.catch(() => { answer.latex = null; }); // asked again on the next press
    }
    return answer.latex;
  }

  async function copy(button) {
    if (!last) return;
    try {
      const tex = (await latexSteps(last))[Number(button.dataset.step)];
      if (tex === undefined) return;
      await navigator.clipboard.writeText(tex);
      page().setStatus("copied");
    } catch (e) {
      page().setStatus("copy_failed", {error: e && e.message ? e.message : String(e)}); // the derivation is not stale
    }
    document.body.dataset.copied = button.dataset.step;
  }

  document.addEventListener("symattn:rendered", (event) => {
    last = event.detail;
    drawFigures(last);
    copyButtons(last);
  });
  document.addEventListener("symattn:language", () => {
    // the answer in the other language comes with the next render; meanwhile the words follow now
    if (!last) return;
    titleFigures(last);
    for (const button of document.querySelectorAll("#derivation button.copy-latex")) {
      const heading = button.previousElementSibling;
      button.textContent = page().ui("copy_latex");
      button.setAttribute("aria-label", page().ui("copy_latex_of", {heading: heading ? heading.textContent.trim() : ""}));
    }
  });
  document.addEventListener("click", (event) => {
    const button = event.target.closest("button.copy-latex");
    if (button) copy(button);
  });
})();
