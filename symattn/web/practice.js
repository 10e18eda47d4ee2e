/* symattn serve: practice mode. The student works the focus row one quantity at a time: types the
 * numbers, gets each box's verdict from POST /api/check (the check tab's machinery), may ask for a hint
 * (POST /api/hint: the formula with the student's numbers in it, written by the server), and once every
 * box is answered may reveal the step.
 *
 * Practice follows the chain a student works by hand (rounding = "hand"): each step from the rounded
 * numbers of the step before. So a number that the checker finds carried from the student's own numbers
 * is right ("hand") where every number before it in the row is right: 4.387 from 0.403 × 10 + …, where
 * the exact value rounds to 4.384. The revealed step is that of the same spec rendered with
 * rounding = "hand", so it shows the numbers the student was led to.
 *
 * Progress is state.practice = {step, answers: {quantity: [numbers as typed]}, revealed: [quantity…]},
 * kept in the URL fragment with the rest of the state (app.js), so a reload or a link keeps it.
 */
"use strict";
(function () {
  const STEPS = ["scores", "scaled", "exp", "exp_sum", "weights", "output"];
  // the derivation's step that each quantity belongs to (its kind, from the render answer's step_kinds)
  const KINDS = {scores: "scores", scaled: "scaling", exp: "softmax", exp_sum: "softmax", weights: "softmax", output: "weighted_sum"};
  const ICONS = {exact: "✔", rounded: "✔", carried: "↪", "input-rounding": "✔", "too-coarse": "≈", "last-digit": "≈", wrong: "✘"};
  const TONES = {exact: "good", rounded: "good", carried: "carried", "input-rounding": "good", "too-coarse": "near", "last-digit": "near", wrong: "wrong", hand: "good"};
  const RIGHT = ["exact", "rounded", "input-rounding"];
  const $ = (id) => document.getElementById(id);
  let answer = null; // the last render answer: the shape of the boxes
  let byHand = null; // the same spec rendered with rounding = "hand": the steps to reveal
  let handSent = 0;
  let verdicts = {}; // "quantity/col" -> verdict of the last check
  let checkTimer = null, sent = 0, hintSent = 0;

  function page() { return window.symattnPage; }
  function progress() {
    const state = page().state();
    const p = state.practice = state.practice || {};
    if (!Number.isInteger(p.step) || p.step < 0 || p.step >= STEPS.length) p.step = 0;
    if (!p.answers || typeof p.answers !== "object") p.answers = {};
    if (!Array.isArray(p.revealed)) p.revealed = [];
    return p;
  }
  function quantity() { return STEPS[progress().step]; }
  function token() { return (page().state().spec.tokens || [])[page().focusIndex()] || ""; }

  function shape() {
    let c = answer && answer.compute;
    if (!c) return null;
    if (c.values) c = c.values;
    if (!c.weights || !c.output || c.heads) return null;
    return {keys: c.key_tokens || c.tokens, dv: c.output.value[0].length};
  }

  function count(q, s) { return q === "exp_sum" ? 1 : q === "output" ? s.dv : s.keys.length; }

  function build() {
    const {ui, phrases, el} = page();
    const p = progress(), q = quantity(), s = shape();
    $("practice-progress").textContent = ui("practice_step", {n: p.step + 1, count: STEPS.length});
    $("practice-question").textContent = fill(phrases().practice.question, {quantity: phrases().quantity[q], token: quote(token())});
    $("practice-previous").disabled = p.step === 0;
    $("practice-next").disabled = p.step === STEPS.length - 1;
    const boxes = [];
    if (s) {
      const typed = p.answers[q];
      for (let j = 0; j < count(q, s); j++) {
        const id = `practice-${q}-${j}`;
        const caption = q === "exp_sum" ? phrases().quantity.exp_sum : q === "output" ? ui("check_column", {n: j + 1}) : s.keys[j];
        const value = q === "exp_sum" ? (typeof typed === "string" ? typed : "") : (Array.isArray(typed) && typed[j] !== undefined ? typed[j] : "");
        boxes.push(el("div", {class: "box", id},
          el("label", {for: id + "-input", class: "caption", text: caption}),
          el("input", {id: id + "-input", type: "text", value, size: 7, autocomplete: "off", spellcheck: "false",
            inputmode: "decimal", class: "claim", dataset: {col: String(j)}}),
          el("span", {class: "verdict", id: id + "-verdict"})));
      }
    }
    $("practice-boxes").replaceChildren(...boxes);
    paint();
    showStep();
  }

  function fill(text, values) { return String(text).replace(/\{([a-z_]+)\}/g, (m, k) => (k in values ? values[k] : m)); }
  function quote(label) { return fill(page().phrases().practice.quote, {x: label}); }

  function remember() {
    const p = progress(), q = quantity();
    const values = Array.from($("practice-boxes").querySelectorAll("input.claim")).map((i) => i.value);
    p.answers[q] = q === "exp_sum" ? (values[0] || "") : values;
  }

  function claims() {
    // every step answered so far: later verdicts may follow from the student's own earlier numbers
    const p = progress(), s = shape(), row = {};
    for (const q of STEPS) {
      const typed = p.answers[q];
      if (typed === undefined || !s) continue;
      if (q === "exp_sum") { if (typeof typed === "string") row[q] = typed; } else if (Array.isArray(typed) && typed.length === count(q, s)) row[q] = typed;
    }
    return {rows: {[token()]: row}};
  }

  async function check() {
    const id = ++sent;
    const {ok, data} = await page().post("/api/check", {spec: page().state().spec, claims: claims(), html: false});
    if (id !== sent) return;
    verdicts = {};
    $("practice-error").hidden = ok;
    if (!ok) $("practice-error").textContent = data ? data.error : page().ui("offline");
    else {
      const focus = page().focusIndex();
      data.claims.forEach((claim, k) => {
        const [q, row, col] = data.places[k];
        if (row === focus) verdicts[`${q}/${col === null ? 0 : col}`] = claim;
      });
    }
    paint();
    document.body.dataset.practiceChecked = String(id);
  }

  function answered() {
    const inputs = Array.from($("practice-boxes").querySelectorAll("input.claim"));
    return inputs.length > 0 && inputs.every((input) => input.value.trim() !== "" && verdicts[`${quantity()}/${input.dataset.col}`]);
  }

  function isRight(q, claim) {
    return RIGHT.includes(claim.verdict) || (claim.verdict === "carried" && allRightBefore(q));
  }

  function allRightBefore(q) {
    const before = STEPS.slice(0, STEPS.indexOf(q));
    return Object.entries(verdicts).every(([key, c]) => !before.includes(key.split("/")[0]) || isRight(key.split("/")[0], c));
  }

  function shownVerdict(q, claim) {
    // the hand chain: carried from the student's own numbers, and every number before it in the row right
    return claim.verdict === "carried" && allRightBefore(q) ? "hand" : claim.verdict;
  }

  function paint() {
    const words = page().phrases();
    for (const input of $("practice-boxes").querySelectorAll("input.claim")) {
      const box = input.closest(".box");
      const claim = verdicts[`${quantity()}/${input.dataset.col}`];
      const shown = claim ? shownVerdict(quantity(), claim) : "";
      const verdict = box.querySelector(".verdict");
      box.className = "box" + (claim ? " tone-" + TONES[shown] : "");
      box.dataset.verdict = shown;
      verdict.replaceChildren();
      if (claim) verdict.append(page().el("span", {class: "icon", "aria-hidden": "true", text: shown === "hand" ? ICONS.exact : ICONS[shown]}),
        page().el("span", {class: "word", text: shown === "hand" ? page().ui("practice_by_hand") : words.verdict[shown]}));
    }
    const ready = answered();
    $("practice-reveal").disabled = !ready;
    $("practice-wait").hidden = ready;
  }

  async function renderByHand() {
    // the spec of the page's last answer, worked as by hand: the steps the practice reveals
    const id = ++handSent;
    const spec = Object.assign({}, answer.spec, {rounding: "hand"});
    const {ok, data} = await page().post("/api/render", {spec, format: "html", compute: false});
    if (id !== handSent) return;
    if (!ok) { byHand = null; return; }
    const holder = document.createElement("div");
    holder.innerHTML = data.html;
    page().typeset(holder);
    byHand = {kinds: data.step_kinds || [], holder};
    showStep();
    document.body.dataset.practiceHand = String(id);
  }

  function showStep() {
    // the step shown only once revealed, and only while its boxes are answered
    const p = progress(), q = quantity(), target = $("practice-step");
    const kinds = (byHand && byHand.kinds) || [];
    const headings = byHand ? byHand.holder.querySelectorAll(":scope > h2") : [];
    const k = kinds.indexOf(KINDS[q]);
    if (!p.revealed.includes(q) || k < 0 || headings.length !== kinds.length || !answered()) {
      target.hidden = true;
      target.replaceChildren();
      return;
    }
    const nodes = [];
    for (let node = headings[k]; node && !(node !== headings[k] && node.tagName === "H2"); node = node.nextElementSibling) {
      if (!node.classList.contains("copy-latex")) nodes.push(node.cloneNode(true));
    }
    target.replaceChildren(...nodes);
    target.hidden = false;
  }

  async function hint() {
    const id = ++hintSent;
    remember();
    const {ok, data} = await page().post("/api/hint", {spec: page().state().spec, quantity: quantity(), claims: claims()});
    if (id !== hintSent) return;
    const box = $("practice-hint-text");
    if (!ok) { $("practice-error").textContent = data ? data.error : page().ui("offline"); $("practice-error").hidden = false; return; }
    const holder = document.createElement("div");
    holder.innerHTML = data.html; // the server's fragment: the student's numbers in it passed the claims reader
    page().typeset(holder);
    box.replaceChildren(...holder.childNodes);
    box.hidden = false;
    box.dataset.quantity = quantity();
    document.body.dataset.hinted = String(id);
  }

  function go(step) {
    remember();
    progress().step = step;
    $("practice-hint-text").hidden = true;
    $("practice-hint-text").replaceChildren();
    build();
    page().save();
    check();
  }

  function wire() {
    $("practice-boxes").addEventListener("input", () => {
      remember();
      page().save();
      paint(); // a box emptied loses its verdict's claim to reveal at once
      clearTimeout(checkTimer);
      checkTimer = setTimeout(check, 80);
    });
    $("practice-hint").onclick = hint;
    $("practice-reveal").onclick = () => {
      if (!answered()) return;
      const p = progress();
      if (!p.revealed.includes(quantity())) p.revealed.push(quantity());
      page().save();
      showStep();
    };
    $("practice-next").onclick = () => go(Math.min(progress().step + 1, STEPS.length - 1));
    $("practice-previous").onclick = () => go(Math.max(progress().step - 1, 0));
  }

  const shown = () => page().state().tab === "practice";
  document.addEventListener("symattn:rendered", (event) => {
    answer = event.detail;
    byHand = null;
    if (shown()) { build(); check(); renderByHand(); }
  });
  document.addEventListener("symattn:tab", (event) => {
    if (event.detail.tab === "practice" && answer) { build(); check(); if (!byHand) renderByHand(); }
  });
  document.addEventListener("symattn:language", () => {
    if (!shown() || !answer) return;
    build();
    check();
    if (!$("practice-hint-text").hidden) hint();
  });
  wire();
})();
