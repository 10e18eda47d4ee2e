/* symattn serve: the page. Plain JavaScript, no build step.
 *
 * The state is {spec, claims, tab, row}: the spec's keys as the server reads them (numbers as the
 * text typed, never floats), the numbers typed in the check tab, the open tab and the checked row.
 * It lives in the URL fragment (a link reproduces the view) and in localStorage; the server keeps
 * nothing. Every edit is sent, debounced, to POST /api/render (and /api/check); the answer is an
 * HTML fragment whose math is TeX, typeset here by the vendored KaTeX.
 *
 * The fragment: "#z=" + base64url(deflate-raw(JSON)) where the browser has CompressionStream
 * (a seed spec: about 300 characters), else "#j=" + base64url(JSON). Both are read back.
 */
"use strict";
(function () {
  const boot = JSON.parse(document.getElementById("boot").textContent);
  const STORE = "symattn.serve.state";
  const DEBOUNCE_MS = 80;
  const MATRICES = ["X", "X_kv", "W_Q", "W_K", "W_V", "Q", "K", "V", "W_O"];
  const VECTORS = ["b_Q", "b_K", "b_V", "b_O"];
  // the "variant" area: one entry per spec key, listed once, in symattn/web/app.py (variants)
  const VARIANTS = boot.variants;
  const CONTROLLED = new Set([...MATRICES, ...VECTORS, "title", "lang", "tokens", "key_tokens", "focus", "scale",
    "rounding", "expand", ...VARIANTS.map((v) => v.key)]);
  // Q and K share d_k: a column added to one is added to the other (and to the matching bias)
  const COLUMN_PARTNERS = {Q: ["K"], K: ["Q"], W_Q: ["W_K", "b_Q", "b_K"], W_K: ["W_Q", "b_Q", "b_K"],
    W_V: ["b_V"], W_O: ["b_O"]};
  const ROW_QUANTITIES = ["scores", "scaled", "exp", "exp_sum", "weights", "percent", "output"];
  const ICONS = {exact: "✔", rounded: "✔", carried: "↪", "input-rounding": "✔", "too-coarse": "≈", "last-digit": "≈", wrong: "✘"};
  const TONES = {exact: "good", rounded: "good", carried: "carried", "input-rounding": "good", "too-coarse": "near", "last-digit": "near", wrong: "wrong"};

  const $ = (id) => document.getElementById(id);
  const el = (tag, attrs, ...children) => {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") node.textContent = v;
      else if (k === "dataset") Object.assign(node.dataset, v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const child of children) if (child) node.append(child);
    return node;
  };

  // practice: practice mode's progress (practice.js): its step, the numbers typed, the steps revealed
  let state = {spec: {}, claims: {}, tab: "derivation", row: "focus", practice: {}};
  let lang = "en";
  let compute = null; // the last good render's intermediates: the check tab's shape
  let sent = 0, shown = 0, checkSent = 0, checkShown = 0;
  let renderTimer = null, checkTimer = null, saveTimer = null;
  let lastInputAt = 0; // performance.now() of the last edit, for the keystroke-to-math measure
  let notice = null; // what the status line says once the page is up to date (a file opened), until the next edit
  let status = null; // what it says now, as [phrase, values, stale], so that it follows the language
  const texCache = new Map();

  // --- language -------------------------------------------------------------------

  function phrases() { return boot.strings[lang] || boot.strings[boot.languages[0]]; }

  function fill(text, values) {
    return String(text).replace(/\{([a-z_]+)\}/g, (m, name) => (values && name in values ? values[name] : m));
  }

  function ui(key, values) { return fill(phrases().ui[key], values); }

  function setLanguage(code) {
    const before = lang;
    lang = boot.strings[code] ? code : boot.languages[0];
    document.documentElement.lang = lang === "zh" ? "zh-CN" : lang;
    document.title = ui("page_title");
    for (const node of document.querySelectorAll("[data-ui]")) node.textContent = ui(node.dataset.ui);
    for (const node of document.querySelectorAll("[data-ui-placeholder]")) node.placeholder = ui(node.dataset.uiPlaceholder);
    if (status) setStatus(...status);
    if (examples) buildExamples();
    if (before !== lang) document.dispatchEvent(new CustomEvent("symattn:language", {detail: {lang}}));
  }

  function browserLanguage() {
    // zh for any zh-* the browser prefers first among the page's languages, else en
    for (const tag of navigator.languages || [navigator.language || ""]) {
      const code = String(tag).toLowerCase().split("-")[0];
      if (code === "zh" || code === "en") return code;
    }
    return "en";
  }

  // --- the spec -------------------------------------------------------------------

  const text = (x) => (typeof x === "string" ? x : String(x));

  function normal(spec) {
    // every number as text, as typed; tokens spelled out so they can be edited
    const out = JSON.parse(JSON.stringify(spec || {}));
    for (const key of MATRICES) if (Array.isArray(out[key])) out[key] = out[key].map((r) => (Array.isArray(r) ? r.map(text) : r));
    for (const key of VECTORS) if (Array.isArray(out[key])) out[key] = out[key].map(text);
    if (Array.isArray(out.mask)) out.mask = out.mask.map((r) => (Array.isArray(r) ? r.map(text) : r));
    for (const key of ["heads", "focus", "scale"]) if (key in out && typeof out[key] === "number") out[key] = text(out[key]);
    const rows = out.X || out.Q;
    if (!out.tokens && Array.isArray(rows)) out.tokens = rows.map((r, i) => "t" + (i + 1));
    if (Array.isArray(out.tokens)) out.tokens = out.tokens.map(text);
    if (Array.isArray(out.key_tokens)) out.key_tokens = out.key_tokens.map(text);
    return out;
  }

  function isCross(spec) { return Array.isArray(spec.key_tokens) || "X_kv" in spec; }

  function rowMatrices(spec) {
    // the matrices with one row per token
    if (spec.X) return ["X"];
    return isCross(spec) ? ["Q"] : ["Q", "K", "V"].filter((k) => Array.isArray(spec[k]));
  }

  function rowLabels(key) {
    const spec = state.spec;
    const keys = spec.key_tokens || spec.tokens || [];
    if (key === "Q" || key === "X") return spec.tokens || [];
    if (key === "K" || key === "V" || key === "X_kv") return isCross(spec) ? keys : spec.tokens || [];
    return null;
  }

  // --- the inputs ------------------------------------------------------------------

  function buildAll() {
    buildSettings();
    buildTokens();
    buildGrids();
    buildFocus();
  }

  function buildSettings() {
    const spec = state.spec;
    $("set-title").value = spec.title || "";
    $("set-lang").value = spec.lang || "en";
    $("set-rounding").value = spec.rounding || "exact";
    $("set-expand").value = spec.expand || "focus";
    $("set-scale").value = "scale" in spec ? text(spec.scale) : "sqrt";
    for (const v of VARIANTS) $("set-" + v.key).value = variantShown(v, spec);
    const matrixMask = $("set-mask").querySelector('option[value="matrix"]');
    const isMatrix = Array.isArray(spec.mask);
    matrixMask.hidden = matrixMask.disabled = !isMatrix;
    if (isMatrix) $("set-mask").value = "matrix";
    const kept = Object.keys(spec).filter((k) => !CONTROLLED.has(k));
    $("kept").hidden = !kept.length;
    $("kept").textContent = kept.length ? ui("kept", {keys: kept.join(", ")}) : "";
  }

  function buildFocus() {
    const select = $("set-focus");
    const tokens = state.spec.tokens || [];
    select.replaceChildren(el("option", {value: "", text: ui("focus_default")}),
      ...tokens.map((t) => el("option", {value: t, text: t})));
    select.value = focusLabel() === tokens[tokens.length - 1] && !("focus" in state.spec) ? "" : focusLabel();
  }

  function focusIndex() {
    const tokens = state.spec.tokens || [];
    const focus = state.spec.focus;
    if (focus === undefined || focus === "") return tokens.length - 1;
    if (tokens.includes(focus)) return tokens.indexOf(focus);
    const n = /^[0-9]+$/.test(text(focus)) ? Number(focus) : 0;
    return n >= 1 && n <= tokens.length ? n - 1 : tokens.length - 1;
  }

  function focusLabel() { return (state.spec.tokens || [])[focusIndex()] || ""; }

  function buildTokens() {
    const list = (key, box) => {
      const labels = state.spec[key] || [];
      box.replaceChildren(...labels.map((label, i) => {
        const id = `${key}-${i + 1}`;
        return el("span", {class: "token"},
          el("label", {for: id, class: "visually-hidden", text: ui("token", {n: i + 1})}),
          el("input", {id, type: "text", value: label, size: Math.max(3, label.length + 1), autocomplete: "off",
            spellcheck: "false", dataset: {key, pos: String(i + 1)}}));
      }));
    };
    list("tokens", $("token-list"));
    $("token-list").setAttribute("role", "group");
    $("token-list").setAttribute("aria-label", ui("tokens"));
    $("key-token-box").hidden = !Array.isArray(state.spec.key_tokens);
    if (Array.isArray(state.spec.key_tokens)) list("key_tokens", $("key-token-list"));
    $("remove-token").disabled = (state.spec.tokens || []).length <= 1;
  }

  function buildGrids() {
    const grids = [];
    const keys = [...MATRICES.filter((k) => Array.isArray(state.spec[k])), ...VECTORS.filter((k) => Array.isArray(state.spec[k]))];
    if (Array.isArray(state.spec.mask)) keys.push("mask");
    for (const key of keys) grids.push(grid(key));
    $("grids").replaceChildren(...grids);
  }

  function grid(key) {
    const vector = VECTORS.includes(key);
    const rows = vector ? [state.spec[key]] : state.spec[key];
    const width = Math.max(...rows.map((r) => (Array.isArray(r) ? r.length : 0)), 0);
    const labels = rowLabels(key);
    const captionId = `grid-${key}-caption`;
    const table = el("table", {class: "grid", "aria-labelledby": captionId},
      el("caption", {id: captionId}, el("span", {class: "name", text: key}),
        el("span", {class: "shape", text: vector ? ` (${width})` : ` (${rows.length}×${width})`})));
    const head = el("tr", {}, el("td", {}));
    for (let j = 1; j <= width; j++) head.append(el("th", {scope: "col", text: String(j)}));
    table.append(el("thead", {}, head));
    const body = el("tbody");
    rows.forEach((row, i) => {
      const label = vector ? "" : (labels && labels[i] !== undefined ? labels[i] : String(i + 1));
      const tr = el("tr", {}, el("th", {scope: "row", text: label}));
      (Array.isArray(row) ? row : []).forEach((value, j) => {
        const pos = vector ? String(j + 1) : `${i + 1},${j + 1}`;
        const name = vector ? ui("entry", {matrix: key, col: j + 1}) : ui("cell", {matrix: key, row: i + 1, col: j + 1});
        tr.append(el("td", {}, el("input", {class: "cell", type: "text", value: text(value), "aria-label": name,
          autocomplete: "off", spellcheck: "false", inputmode: "decimal", size: 6, dataset: {key, pos}})));
      });
      body.append(tr);
    });
    table.append(body);
    const buttons = el("div", {class: "buttons small"});
    const button = (action, label, aria) => el("button", {type: "button", text: ui(label), "aria-label": ui(aria, {matrix: key}),
      dataset: {grid: key, action}});
    if (!vector) {
      buttons.append(button("add-row", "add_row", "add_row_to"), button("remove-row", "remove_row", "remove_row_from"));
    }
    buttons.append(button("add-column", "add_column", "add_column_to"), button("remove-column", "remove_column", "remove_column_from"));
    for (const b of buttons.querySelectorAll("button")) {
      if ((b.dataset.action === "remove-row" && rows.length <= 1) || (b.dataset.action === "remove-column" && width <= 1)) b.disabled = true;
    }
    return el("div", {class: "grid-wrap", dataset: {grid: key}}, el("div", {class: "grid-scroll"}, table), buttons);
  }

  function setCell(key, pos, value) {
    const spec = state.spec;
    const idx = pos.split(",").map((p) => Number(p) - 1);
    if (idx.length === 1) {
      if (key === "tokens" || key === "key_tokens") {
        const old = spec[key][idx[0]];
        spec[key][idx[0]] = value;
        if (key === "tokens" && spec.focus === old) spec.focus = value;
      } else spec[key][idx[0]] = value;
    } else spec[key][idx[0]][idx[1]] = value;
  }

  function changeShape(key, action) {
    const spec = state.spec;
    const vector = VECTORS.includes(key);
    const rows = vector ? null : spec[key];
    const addColumn = (k) => {
      if (!Array.isArray(spec[k])) return;
      if (VECTORS.includes(k)) spec[k].push("0");
      else spec[k].forEach((r) => r.push(k === "mask" ? "1" : "0"));
    };
    const removeColumn = (k) => {
      if (!Array.isArray(spec[k])) return;
      if (VECTORS.includes(k)) { if (spec[k].length > 1) spec[k].pop(); } else spec[k].forEach((r) => { if (r.length > 1) r.pop(); });
    };
    const width = (k) => (VECTORS.includes(k) ? spec[k].length : spec[k][0].length);
    if (action === "add-row") rows.push(rows[0].map(() => (key === "mask" ? "1" : "0")));
    else if (action === "remove-row") { if (rows.length > 1) rows.pop(); } else {
      const partners = (COLUMN_PARTNERS[key] || []).filter((k) => Array.isArray(spec[k]) && width(k) === width(key));
      for (const k of [key, ...partners]) (action === "add-column" ? addColumn : removeColumn)(k);
    }
  }

  function changeTokens(add) {
    const spec = state.spec;
    const tokens = spec.tokens;
    if (add) {
      let n = tokens.length + 1;
      while (tokens.includes("t" + n)) n++;
      tokens.push("t" + n);
      for (const k of rowMatrices(spec)) spec[k].push(spec[k][0].map(() => "0"));
      if (Array.isArray(spec.mask)) {
        if (!isCross(spec)) spec.mask.forEach((r) => r.push("0"));
        spec.mask.push(spec.mask[0].map((x, j) => (isCross(spec) || j < spec.mask.length + 1 ? "1" : "0")));
      }
    } else if (tokens.length > 1) {
      const gone = tokens.pop();
      if (spec.focus === gone) delete spec.focus;
      for (const k of rowMatrices(spec)) if (spec[k].length > 1) spec[k].pop();
      if (Array.isArray(spec.mask) && spec.mask.length > 1) {
        spec.mask.pop();
        if (!isCross(spec)) spec.mask.forEach((r) => r.pop());
      }
    }
  }

  // what a variant's control shows for the spec: a list as "a, b", a table as "a, b; c, d" (a row per ";"),
  // a flag as "true"/"false"
  function variantShown(v, spec) {
    if (!(v.key in spec)) return v.default;
    const value = spec[v.key];
    if (v.kind === "list") return Array.isArray(value) ? value.map(text).join(", ") : text(value);
    if (v.kind === "table") return Array.isArray(value) ? value.map((r) => (Array.isArray(r) ? r.map(text).join(", ") : text(r))).join("; ") : text(value);
    if (v.kind === "flag") return value === true ? "true" : "false";
    return Array.isArray(value) ? v.default : text(value);
  }

  function onSetting(target) {
    const spec = state.spec;
    const key = target.dataset.key;
    const value = target.value;
    const variant = VARIANTS.find((v) => v.key === key);
    if (key === "mask") {
      if (value !== "matrix") spec.mask = value;
      buildGrids();
    } else if (variant && variant.kind === "list") {
      const items = value.split(",").map((x) => x.trim()).filter((x) => x !== "");
      if (items.length) spec[key] = items; else delete spec[key];
    } else if (variant && variant.kind === "table") {
      // numbers as typed, rows split by ";": an empty row is dropped, a short one left for the server to name
      const rows = value.split(";").map((r) => r.split(",").map((x) => x.trim()).filter((x) => x !== "")).filter((r) => r.length);
      if (rows.length) spec[key] = rows; else delete spec[key];
    } else if (variant && variant.kind === "flag") {
      if (value === "true") spec[key] = true; else delete spec[key];
    } else if (key === "title" || key === "scale" || key === "focus" || (variant && variant.kind !== "select")) {
      if (value.trim() === "") delete spec[key]; else spec[key] = value;
    } else if (variant && value === variant.default) delete spec[key];  // a spec without the key says the same
    else spec[key] = value;
    if (key === "lang") { translateExample(value); setLanguage(value); buildAll(); buildCheckRows(); buildBoxes(); }
  }

  function translateExample(code) {
    // the built-in example's own title and labels follow the language; labels the user typed stay
    if (!examples) return;
    const spec = state.spec;
    const same = (a, b) => JSON.stringify(a === undefined ? null : a.map(text)) === JSON.stringify(b === undefined ? null : b.map(text));
    const from = examples.find((e) => e.lang !== code && (e.spec.title || "") === (spec.title || "") &&
      same(e.spec.tokens, spec.tokens) && same(e.spec.key_tokens, spec.key_tokens));
    const to = from && examples.find((e) => e.name === from.name && e.lang === code);
    if (!to) return;
    for (const key of ["title", "tokens", "key_tokens"]) {
      if (key in to.spec) spec[key] = key === "title" ? to.spec[key] : to.spec[key].map(text); else delete spec[key];
    }
    if (typeof spec.focus === "string" && from.spec.tokens && from.spec.tokens.map(text).includes(spec.focus)) {
      spec.focus = to.spec.tokens.map(text)[from.spec.tokens.map(text).indexOf(spec.focus)];
    }
  }

  // --- talking to the server ------------------------------------------------------

  async function post(path, body) {
    let response;
    try {
      // Accept-Language: the server words its errors in the page's language
      response = await fetch(path, {method: "POST", headers: {"Content-Type": "application/json", "Accept-Language": lang},
        body: JSON.stringify(body)});
    } catch (e) {
      return {ok: false, status: 0, data: {error: ui("offline"), where: null}};
    }
    const type = response.headers.get("content-type") || "";
    if (type.startsWith("application/json")) return {ok: response.ok, status: response.status, data: await response.json(), response};
    return {ok: response.ok, status: response.status, data: null, response};
  }

  function edited(message) {
    notice = message || null;
    lastInputAt = performance.now();
    save();
    clearTimeout(renderTimer);
    renderTimer = setTimeout(update, DEBOUNCE_MS);
  }

  async function update() {
    const id = ++sent;
    const inputAt = lastInputAt;
    setStatus("updating");
    const spec = JSON.parse(JSON.stringify(state.spec)); // what this answer is of (live.js asks for its LaTeX)
    const {ok, data} = await post("/api/render", {spec, format: "html", exact: true});
    if (id < shown) return; // a later answer is already on the page
    if (!ok) {
      if (id === sent) showError(data ? data.error : ui("offline"), data && data.where);
      document.body.dataset.answered = String(id);
      return;
    }
    shown = id;
    compute = data.compute;
    const box = document.createElement("div");
    box.innerHTML = data.html;
    typeset(box);
    $("derivation").replaceChildren(...box.childNodes);
    document.dispatchEvent(new CustomEvent("symattn:rendered", {detail: Object.assign({spec}, data)}));
    if (inputAt && inputAt === lastInputAt) {
      // keystroke to updated math, for the browser test and for anyone curious (performance.getEntriesByName)
      performance.measure("symattn:update", {start: inputAt, end: performance.now()});
    }
    if (id === sent) clearError();
    buildCheckRows();
    if (state.tab === "check") { buildBoxes(); scheduleCheck(0); }
    // for tests and scripts: which answer is shown (rendered), and the last one that came, shown or refused
    document.body.dataset.rendered = document.body.dataset.answered = String(id);
  }

  function typeset(root) {
    if (!window.katex) return;
    if (texCache.size > 5000) texCache.clear();
    for (const node of root.querySelectorAll("span.math, div.math")) {
      const display = node.tagName === "DIV";
      const tex = node.textContent;
      const key = (display ? "D" : "I") + tex;
      let html = texCache.get(key);
      if (html === undefined) {
        html = katex.renderToString(tex, {displayMode: display, throwOnError: false});
        texCache.set(key, html);
      }
      node.innerHTML = html;
    }
  }

  function setStatus(phrase, values, stale) {
    // a [ui] phrase and its values: said again in the new language when the language changes
    status = [phrase, values, stale];
    $("status").textContent = ui(phrase, values);
    $("status").classList.toggle("stale", !!stale);
    $("derivation").classList.toggle("stale", !!stale);
  }

  // --- errors next to their input -------------------------------------------------

  function clearError() {
    for (const node of document.querySelectorAll("#inputs [aria-invalid]")) {
      node.removeAttribute("aria-invalid");
      node.removeAttribute("aria-describedby");
    }
    const old = $("input-error");
    if (old) old.remove();
    $("general-error").hidden = true;
    if (notice) setStatus(...notice); else setStatus("updated");
  }

  function anchorOf(where, scope) {
    if (!where || !where.key) return null;
    const key = CSS.escape(where.key);
    const pos = (where.position || []).join(",");
    return (pos && scope.querySelector(`[data-key="${key}"][data-pos="${pos}"]`)) ||
      scope.querySelector(`[data-key="${key}"]:not([data-pos])`) ||
      scope.querySelector(`[data-grid="${key}"]`) ||
      scope.querySelector(`[data-key="${key}"]`);
  }

  function showError(message, where) {
    clearError();
    setStatus("stale", null, true);
    const anchor = where && where.source === "spec" ? anchorOf(where, $("inputs")) : null;
    if (!anchor) {
      $("general-error").textContent = message;
      $("general-error").hidden = false;
      return;
    }
    const note = el("p", {id: "input-error", class: "error inline", role: "alert", text: message});
    if (anchor.matches("input, select, textarea")) {
      anchor.setAttribute("aria-invalid", "true");
      anchor.setAttribute("aria-describedby", "input-error");
    }
    const place = anchor.closest(".grid-wrap, .field, .tokens") || anchor;
    if (place.classList.contains("grid-wrap")) place.querySelector(".grid-scroll").after(note);
    else if (place.classList.contains("tokens")) $("token-list").after(note);
    else place.append(note);
  }

  // --- the check tab --------------------------------------------------------------

  function shape() {
    let c = compute;
    if (!c) return null;
    if (c.values) c = c.values;
    if (!c.weights || !c.output || c.heads) return null;
    return {tokens: c.tokens, keys: c.key_tokens || c.tokens, dv: c.output.value[0].length};
  }

  function buildCheckRows() {
    const select = $("check-row");
    const tokens = state.spec.tokens || [];
    const value = state.row;
    select.replaceChildren(
      ...tokens.map((t, i) => el("option", {value: String(i + 1), text: t})),
      el("option", {value: "all", text: ui("check_all")}));
    const focus = String(focusIndex() + 1);
    select.value = value === "all" || (value !== "focus" && Number(value) >= 1 && Number(value) <= tokens.length) ? value : focus;
  }

  function checkedRows(s) {
    if (state.row === "all") return s.tokens.map((t, i) => i);
    const n = Number(state.row);
    return [n >= 1 && n <= s.tokens.length ? n - 1 : focusIndex()];
  }

  function claimValue(label, quantity, j) {
    const row = ((state.claims.rows || {})[label] || {})[quantity];
    if (j === null) return row === undefined || Array.isArray(row) ? "" : text(row);
    return Array.isArray(row) && row[j] !== undefined ? text(row[j]) : "";
  }

  let builtShape = "";

  function buildBoxes(force) {
    const s = shape();
    const key = JSON.stringify([s, state.row, lang, state.spec.tokens]);
    if (!force && key === builtShape) return;
    builtShape = key;
    const boxes = $("boxes");
    if (!s) { boxes.replaceChildren(); return; }
    const q = phrases().quantity;
    const blocks = [];
    const sqrt = box("sqrt_dk", null, null, "claims.sqrt_dk", "", q.sqrt_dk, "sqrt_dk", state.claims.sqrt_dk ? text(state.claims.sqrt_dk) : "");
    blocks.push(el("div", {class: "qline"}, el("span", {class: "qname", id: "q-sqrt_dk", text: q.sqrt_dk}), el("div", {class: "qboxes"}, sqrt)));
    for (const i of checkedRows(s)) {
      const label = s.tokens[i];
      const block = el("section", {class: "check-row", "aria-label": ui("check_row_heading", {token: label})},
        el("h3", {text: ui("check_row_heading", {token: label})}));
      for (const quantity of ROW_QUANTITIES) {
        const nameId = `q-${quantity}-${i}`;
        const line = el("div", {class: "qline"}, el("span", {class: "qname", id: nameId, text: q[quantity]}));
        const items = el("div", {class: "qboxes"});
        const base = `claims.rows.${label}.${quantity}`;
        if (quantity === "exp_sum") items.append(box(quantity, i, null, base, "", "", nameId, claimValue(label, quantity, null)));
        else {
          const count = quantity === "output" ? s.dv : s.keys.length;
          for (let j = 0; j < count; j++) {
            const caption = quantity === "output" ? ui("check_column", {n: j + 1}) : s.keys[j];
            items.append(box(quantity, i, j, base, String(j + 1), caption, nameId, claimValue(label, quantity, j)));
          }
        }
        line.append(items);
        block.append(line);
      }
      blocks.push(block);
    }
    boxes.replaceChildren(...blocks);
  }

  function box(quantity, row, col, key, pos, caption, nameId, value) {
    const id = `box-${quantity}-${row === null ? "n" : row}-${col === null ? "n" : col}`;
    const captionId = id + "-caption";
    const input = el("input", {id: id + "-input", type: "text", value, size: 7, autocomplete: "off", spellcheck: "false",
      inputmode: "decimal", class: "claim", "aria-labelledby": caption ? `${nameId} ${captionId}` : nameId,
      "aria-describedby": `${id}-verdict ${id}-explain`,
      dataset: {key, quantity, row: row === null ? "" : String(row), col: col === null ? "" : String(col)}});
    if (pos) input.dataset.pos = pos;
    return el("div", {class: "box", id},
      caption ? el("label", {for: input.id, id: captionId, class: "caption", text: caption}) : null,
      input,
      el("span", {class: "verdict", id: id + "-verdict"}),
      el("span", {class: "explain", id: id + "-explain"}));
  }

  function claimsFromBoxes() {
    const claims = {rows: {}};
    const tokens = (shape() || {tokens: []}).tokens;
    for (const input of $("boxes").querySelectorAll("input.claim")) {
      const {quantity, row, col} = input.dataset;
      if (quantity === "sqrt_dk") { claims.sqrt_dk = input.value; continue; }
      const label = tokens[Number(row)];
      const section = claims.rows[label] = claims.rows[label] || {};
      if (col === "") section[quantity] = input.value;
      else (section[quantity] = section[quantity] || [])[Number(col)] = input.value;
    }
    return claims;
  }

  function rememberClaims() {
    // keep the numbers of rows not shown now too
    const fresh = claimsFromBoxes();
    const rows = Object.assign({}, state.claims.rows || {}, fresh.rows);
    state.claims = {rows};
    if ("sqrt_dk" in fresh) state.claims.sqrt_dk = fresh.sqrt_dk;
  }

  function scheduleCheck(delay) {
    clearTimeout(checkTimer);
    checkTimer = setTimeout(runCheck, delay === undefined ? DEBOUNCE_MS : delay);
  }

  async function runCheck() {
    const id = ++checkSent;
    const claims = claimsFromBoxes();
    const {ok, data} = await post("/api/check", {spec: state.spec, claims});
    if (id < checkShown) return;
    checkShown = id;
    for (const node of $("boxes").querySelectorAll(".box")) paint(node, null);
    for (const node of $("boxes").querySelectorAll("[aria-invalid]")) node.removeAttribute("aria-invalid");
    if (!ok) {
      const where = data && data.where;
      $("check-error").textContent = data ? data.error : ui("offline");
      $("check-error").hidden = false;
      const anchor = where && where.source === "claims" ? anchorOf(where, $("boxes")) : null;
      if (anchor && anchor.matches("input")) anchor.setAttribute("aria-invalid", "true");
      document.body.dataset.checked = String(id);
      return;
    }
    $("check-error").hidden = true;
    data.claims.forEach((claim, k) => {
      const [quantity, row, col] = data.places[k];
      const node = $(`box-${quantity}-${row === null ? "n" : row}-${col === null ? "n" : col}`);
      if (node) paint(node, claim);
    });
    const counts = data.summary.counts;
    const answered = data.claims.length;
    $("check-counts").textContent = ui("check_counts", {n: answered, problems: (counts.wrong || 0) + (counts["last-digit"] || 0) + (counts["too-coarse"] || 0)});
    const report = document.createElement("div");
    report.innerHTML = data.html;
    if ($("report-details").open) typeset(report);
    $("report").replaceChildren(...report.childNodes);
    document.body.dataset.checked = String(id);
  }

  function paint(node, claim) {
    const verdict = node.querySelector(".verdict");
    const explain = node.querySelector(".explain");
    node.className = "box" + (claim ? " tone-" + TONES[claim.verdict] : "");
    node.dataset.verdict = claim ? claim.verdict : "";
    if (!claim) { verdict.replaceChildren(); explain.replaceChildren(); return; }
    const words = phrases();
    const name = words.verdict[claim.verdict];
    verdict.replaceChildren(el("span", {class: "icon", "aria-hidden": "true", text: ICONS[claim.verdict]}),
      el("span", {class: "word", text: claim.truncated ? `${name} · ${words.report.truncated}` : name}));
    // the reason, under the box (never over another): the verdict's word is above it already, and a number
    // exact or correctly rounded needs none
    const unit = claim.quantity === "percent" ? "%" : "";
    const lines = [];
    if (claim.diagnosis && words.slip[claim.diagnosis]) lines.push(words.slip[claim.diagnosis]);
    if (claim.expected !== null && !["exact", "rounded"].includes(claim.verdict)) lines.push(fill(words.report.expected, {value: claim.expected + unit}));
    if (claim.carried !== null && claim.carried !== claim.expected) lines.push(fill(words.report.carried_from, {value: claim.carried + unit}));
    explain.textContent = lines.join(words.report.sep);
  }

  // --- tabs ----------------------------------------------------------------------

  const TABS = ["derivation", "check", "practice"];

  function selectTab(name, focus) {
    state.tab = TABS.includes(name) ? name : "derivation";
    for (const name of TABS) {
      const [tab, panel] = ["tab-" + name, "panel-" + name];
      const on = name === state.tab;
      $(tab).setAttribute("aria-selected", on ? "true" : "false");
      $(tab).tabIndex = on ? 0 : -1;
      $(panel).hidden = !on;
      if (on && focus) $(tab).focus();
    }
    if (state.tab === "check") { buildBoxes(); scheduleCheck(0); }
    document.dispatchEvent(new CustomEvent("symattn:tab", {detail: {tab: state.tab}}));
  }

  // --- saving: URL fragment and localStorage ----------------------------------------

  function b64url(bytes) {
    let binary = "";
    for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function unb64url(textIn) {
    const binary = atob(textIn.replace(/-/g, "+").replace(/_/g, "/"));
    return Uint8Array.from(binary, (c) => c.charCodeAt(0));
  }

  async function encode(value) {
    const bytes = new TextEncoder().encode(JSON.stringify(value));
    if (!window.CompressionStream) return "j=" + b64url(bytes);
    const stream = new Blob([bytes]).stream().pipeThrough(new CompressionStream("deflate-raw"));
    return "z=" + b64url(new Uint8Array(await new Response(stream).arrayBuffer()));
  }

  async function decode(fragment) {
    const [kind, data] = [fragment.slice(0, 2), fragment.slice(2)];
    let bytes = unb64url(data);
    if (kind === "z=") {
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
      bytes = new Uint8Array(await new Response(stream).arrayBuffer());
    } else if (kind !== "j=") throw new Error("unknown fragment");
    return JSON.parse(new TextDecoder().decode(bytes));
  }

  function snapshot() { return {spec: state.spec, claims: state.claims, tab: state.tab, row: state.row, practice: state.practice}; }

  function save() {
    clearTimeout(saveTimer);
    saveTimer = setTimeout(async () => {
      const value = snapshot();
      try { localStorage.setItem(STORE, JSON.stringify(value)); } catch (e) { /* private mode, or full */ }
      const fragment = await encode(value);
      history.replaceState(null, "", "#" + fragment);
      document.body.dataset.saved = fragment.slice(0, 2);
    }, 30);
  }

  // --- files -----------------------------------------------------------------------

  async function download(body, name) {
    setStatus("preparing", {name});
    const {ok, data, response} = await post("/api/export", body);
    if (!ok) { if (data) setStatus("failed", {error: data.error}, true); else setStatus("offline", null, true); return; }
    const blob = await response.blob();
    const disposition = response.headers.get("content-disposition") || "";
    const match = /filename="([^"]+)"/.exec(disposition);
    const a = el("a", {href: URL.createObjectURL(blob), download: match ? match[1] : name});
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
    setStatus("updated");
  }

  function claimsOfFile(raw) {
    // a claims table's row sections and whole matrices, as the check tab holds them
    const claims = {rows: {}};
    const tokens = state.spec.tokens || [];
    if (!raw || typeof raw !== "object") return claims;
    if (raw.sqrt_dk !== undefined) claims.sqrt_dk = text(raw.sqrt_dk);
    for (const quantity of ROW_QUANTITIES) {
      const value = raw[quantity];
      if (!Array.isArray(value)) continue;
      value.forEach((row, i) => {
        const label = tokens[i];
        if (label === undefined) return;
        const section = claims.rows[label] = claims.rows[label] || {};
        section[quantity] = Array.isArray(row) ? row.map(text) : text(row);
      });
    }
    for (const [label, section] of Object.entries(raw.rows || {})) {
      const name = tokens.includes(label) ? label : tokens[Number(label) - 1];
      if (name === undefined || !section || typeof section !== "object") continue;
      const target = claims.rows[name] = claims.rows[name] || {};
      for (const [quantity, value] of Object.entries(section)) target[quantity] = Array.isArray(value) ? value.map(text) : text(value);
    }
    // single entries, as an answers file of symattn exercise writes them: "scores[3][1]" (1-based), "exp_sum[3]"
    for (const [key, value] of Object.entries(raw)) {
      const entry = /^([a-z_]+)\[(\d+)\](?:\[(\d+)\])?$/.exec(key);
      if (!entry || !ROW_QUANTITIES.includes(entry[1])) continue;
      const label = tokens[Number(entry[2]) - 1];
      if (label === undefined) continue;
      const section = claims.rows[label] = claims.rows[label] || {};
      if (entry[3] === undefined) { section[entry[1]] = text(value); continue; }
      const row = Array.isArray(section[entry[1]]) ? section[entry[1]] : [];
      row[Number(entry[3]) - 1] = text(value);
      section[entry[1]] = Array.from(row, (x) => (x === undefined ? "" : x)); // no holes: each column a text
    }
    return claims;
  }

  async function openText(toml, name) {
    const {ok, data} = await post("/api/parse", {toml, name});
    if (!ok) {
      $("general-error").textContent = data ? data.error : ui("offline");
      $("general-error").hidden = false;
      return;
    }
    load(data.spec, data.claims, ["opened", {name}]);
  }

  function load(spec, claims, message) {
    state.spec = normal(spec);
    state.claims = claims ? claimsOfFile(claims) : {};
    state.row = "focus";
    state.practice = {};
    compute = null;
    setLanguage(state.spec.lang || "en");
    buildAll();
    buildCheckRows();
    builtShape = "";
    edited(message);
  }

  let examples = null; // the built-in examples (GET /api/examples), once loaded

  async function loadExamples() {
    const response = await fetch("/api/examples");
    examples = await response.json();
    buildExamples();
    $("load-example").onclick = () => {
      const item = examples[Number($("example").value)];
      if (item) load(item.spec, null, ["loaded", {name: item.plain_title}]);
    };
  }

  function buildExamples() {
    // the examples of the page's language, each by its title as plain text (no TeX)
    const select = $("example");
    const chosen = select.value === "" ? null : examples[Number(select.value)]; // none yet: the seed
    const mine = examples.map((item, i) => [item, i]).filter(([item]) => item.lang === lang);
    select.replaceChildren(...mine.map(([item, i]) => el("option", {value: String(i), text: item.plain_title})));
    const same = mine.find(([item]) => item.name === (chosen ? chosen.name : "seed"));
    if (same) select.value = String(same[1]);
  }

  // --- wiring ----------------------------------------------------------------------

  function wire() {
    const inputs = $("inputs");
    inputs.addEventListener("input", (event) => {
      const target = event.target;
      if (target.id === "paste-text" || target.id === "open-file") return;
      if (target.dataset.pos !== undefined && target.dataset.key) {
        setCell(target.dataset.key, target.dataset.pos, target.value);
        if (target.dataset.key === "tokens" || target.dataset.key === "key_tokens") { refreshRowLabels(); buildFocus(); }
      } else if (target.dataset.key) {
        if (target.tagName === "SELECT") return; // selects report on "change"
        onSetting(target);
      } else return;
      edited();
    });
    inputs.addEventListener("change", (event) => {
      const target = event.target;
      if (target.tagName !== "SELECT" || !target.dataset.key) return;
      onSetting(target);
      edited();
    });
    inputs.addEventListener("keydown", (event) => {
      // Enter: the cell below (Tab already moves along the row)
      const target = event.target;
      if (event.key !== "Enter" || !target.classList.contains("cell")) return;
      const [i, j] = target.dataset.pos.split(",").map(Number);
      const below = inputs.querySelector(`input.cell[data-key="${CSS.escape(target.dataset.key)}"][data-pos="${i + 1},${j}"]`);
      if (below) { event.preventDefault(); below.focus(); below.select(); }
    });
    inputs.addEventListener("click", (event) => {
      const target = event.target.closest("button[data-grid]");
      if (!target) return;
      changeShape(target.dataset.grid, target.dataset.action);
      rebuildKeepingFocus(`button[data-grid="${CSS.escape(target.dataset.grid)}"][data-action="${target.dataset.action}"]`);
      edited();
    });
    $("add-token").onclick = () => { changeTokens(true); rebuildKeepingFocus("#add-token"); edited(); };
    $("remove-token").onclick = () => { changeTokens(false); rebuildKeepingFocus("#remove-token"); edited(); };
    $("boxes").addEventListener("input", () => { rememberClaims(); save(); scheduleCheck(); });
    $("check-row").addEventListener("change", () => { rememberClaims(); state.row = $("check-row").value; buildBoxes(true); save(); scheduleCheck(0); });
    $("report-details").addEventListener("toggle", () => { if ($("report-details").open) typeset($("report")); });
    $("tab-derivation").onclick = () => { selectTab("derivation"); save(); };
    $("tab-check").onclick = () => { selectTab("check"); save(); };
    $("tab-practice").onclick = () => { selectTab("practice"); save(); };
    for (const name of TABS) {
      $("tab-" + name).addEventListener("keydown", (event) => {
        const k = TABS.indexOf(state.tab), n = TABS.length;
        const next = {ArrowLeft: (k + n - 1) % n, ArrowRight: (k + 1) % n, Home: 0, End: n - 1}[event.key];
        if (next === undefined) return;
        event.preventDefault();
        selectTab(TABS[next], true);
        save();
      });
    }
    $("open-file-button").onclick = () => $("open-file").click();
    $("open-file").addEventListener("change", async () => {
      const file = $("open-file").files[0];
      if (!file) return;
      if (file.size > boot.limits.body) {
        $("general-error").textContent = ui("file_too_large", {name: file.name, kib: boot.limits.body / 1024});
        $("general-error").hidden = false;
      } else await openText(await file.text(), file.name);
      $("open-file").value = "";
    });
    $("paste-toggle").onclick = () => {
      const box = $("paste-box");
      box.hidden = !box.hidden;
      $("paste-toggle").setAttribute("aria-expanded", String(!box.hidden));
      if (!box.hidden) $("paste-text").focus();
    };
    $("paste-open").onclick = () => openText($("paste-text").value, "<pasted>");
    $("download-toml").onclick = () => download({spec: state.spec, format: "toml"}, "symattn.toml");
    for (const button of document.querySelectorAll("button.export")) {
      button.onclick = () => {
        const what = button.dataset.what || "derivation";
        const body = {spec: state.spec, format: button.dataset.format, what};
        if (what === "report") { if ($("boxes").children.length) rememberClaims(); body.claims = claimsForReport(); }
        download(body, button.textContent.trim());
      };
    }
  }

  function claimsForReport() {
    const tokens = state.spec.tokens || [];
    const rows = {};
    for (const [label, section] of Object.entries(state.claims.rows || {})) if (tokens.includes(label)) rows[label] = section;
    const claims = {rows};
    if (state.claims.sqrt_dk) claims.sqrt_dk = state.claims.sqrt_dk;
    return claims;
  }

  function refreshRowLabels() {
    for (const wrap of document.querySelectorAll(".grid-wrap")) {
      const labels = rowLabels(wrap.dataset.grid);
      if (!labels) continue;
      wrap.querySelectorAll("tbody th").forEach((th, i) => { th.textContent = labels[i] !== undefined ? labels[i] : String(i + 1); });
    }
  }

  function rebuildKeepingFocus(selector) {
    buildAll();
    const again = document.querySelector(selector);
    if (again && !again.disabled) again.focus();
  }

  async function start() {
    setLanguage((boot.initial && boot.initial.lang) || "en");
    window.symattnPage = {ui, phrases, post, el, typeset, setStatus, save, focusIndex, state: () => state,
      lang: () => lang};
    let saved = null;
    if (location.hash.length > 3) {
      try { saved = await decode(location.hash.slice(1)); } catch (e) { saved = null; }
    }
    if (!saved && !boot.given) {
      try { saved = JSON.parse(localStorage.getItem(STORE) || "null"); } catch (e) { saved = null; }
    }
    if (!saved || typeof saved.spec !== "object" || saved.spec === null) {
      // nothing kept: a spec named on the command line, or the built-in example in the browser's language
      saved = {spec: boot.given ? boot.initial : boot.builtin[browserLanguage()] || boot.initial};
    }
    state = {spec: normal(saved.spec), claims: saved.claims || {}, tab: saved.tab || "derivation", row: saved.row || "focus",
      practice: saved.practice && typeof saved.practice === "object" ? saved.practice : {}};
    setLanguage(state.spec.lang || "en");
    wire();
    buildAll();
    buildCheckRows();
    selectTab(state.tab, false);
    loadExamples();
    lastInputAt = 0;
    save();
    update();
  }

  start();
})();
