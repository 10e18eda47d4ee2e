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
 * With block_keys (the online softmax) the round goes through the blocks after the scaled scores: in each
 * block the running max m, the rescale e^(m_old − m_new), the running sum l and the accumulator acc of the
 * focus row, claimed as running_max[b][i] … accumulator[b][i] and judged by the same checker, then the
 * output acc / l.
 *
 * With an [mla] table (MLA) the round starts from X: the latent c_KV of every token, the focus row's query Q,
 * then K and V of every token (the naive route) or the absorbed query q̃ = q W_UKᵀ with its scores q̃ c_KVᵀ
 * (the absorbed route, which ends with u = P c_KV and the output o = u W_UV). A step reveals the MLA step only
 * up to the matrix it asks for (CUTS): the rest shows numbers that later steps ask.
 *
 * With RoPE (TURN) the scores come after the turn: every token's angles rope_angle (none with given cos/sin
 * tables), their rope_cos and rope_sin, the focus row's Q′ and every key's K′ (Q_rot, K_rot), in the order the
 * checker carries them; with MLA only the decoupled dims turn, after K and V (naive) or before q̃ (absorbed).
 * At given positions the keys' angles, cos and sin are their own (rope_key_angle, …, a row per key), asked after the
 * queries'. With QK-norm (NORM): σ of the focus row's q and of every key's k (Q_rms, K_rms), then Q̂ and K̂. A spec
 * with cross-attention and no positions has no turn steps (the angles are claimed by row): the round says so.
 *
 * Progress is state.practice = {step, answers: {name: [numbers as typed]}, revealed: [step…]}, a name
 * being a quantity or, in a block, "running_max[2]"; kept in the URL fragment with the rest of the state
 * (app.js), so a reload or a link keeps it.
 */
"use strict";
(function () {
  const STEPS = ["scores", "scaled", "exp", "exp_sum", "weights", "output"];
  const TILED = ["scores", "scaled", "block", "output"]; // "block": one step per block of keys
  const BLOCK = ["running_max", "rescale", "running_sum", "accumulator"];
  const MLA = {naive: ["latent", "Q", "K", "V", "scores"], absorbed: ["latent", "Q", "absorbed"]}; // before "scaled"
  const PARTS = {absorbed: ["absorbed_query", "scores"], absorbed_output: ["latent_output", "output"]}; // two in one step
  const EVERY = ["latent", "K", "V"]; // every token's row, claimed as latent[i] …
  const TURN = ["angle", "trig", "Q_rot", "K_rot"]; // RoPE's turn, right before the scores (or q̃)
  const NORM = ["rms", "Q_norm", "K_norm"]; // QK-norm's
  const ROWS = {angle: ["rope_angle"], trig: ["rope_cos", "rope_sin"], K_rot: ["K_rot"], K_norm: ["K_norm"]}; // by row
  const KEYED = {angle: ["rope_key_angle"], trig: ["rope_key_cos", "rope_key_sin"]}; // the keys' own, at given positions
  const BY_ROW = ["rope_angle", "rope_cos", "rope_sin", "K_rot", "K_norm", "K_rms", ...KEYED.angle, ...KEYED.trig]; // claimed q[row] for each row
  const FOCUS = ["Q", "Q_rot", "Q_norm", "Q_rms"]; // claimed q[i] of the focus row
  const PARTS_CAPTIONED = {absorbed_query: true, latent_output: true}; // "q̃, column n", "u, column n"
  // where a revealed MLA step stops: the last display whose TeX holds one of these (the matrix asked)
  const TURNED = ["Q'=", "Q'\\approx"]; // the turn's and QK-norm's steps stop at Q′ (Q̂): K′ (K̂) is a later step's answer
  const KEYS_TURNED = ["K'=", "K'\\approx"]; // and at K′ (K̂): the Q′K′ᵀ line after it is the scores' answer
  const CUTS = {latent: ["c_{KV} = X W_{DKV}"], Q: ["W_Q=", "W_{UQ}="], K: ["W_{UK}="],
    angle: TURNED, trig: TURNED, Q_rot: TURNED, rms: TURNED, Q_norm: TURNED, K_rot: KEYS_TURNED, K_norm: KEYS_TURNED};
  // the derivation's step that each quantity belongs to (its kind, from the render answer's step_kinds)
  const KINDS = {scores: "scores", scaled: "scaling", exp: "softmax", exp_sum: "softmax", weights: "softmax", output: "weighted_sum",
    block: "tiling", latent: "mla", Q: "mla", K: "mla", V: "mla", absorbed: "mla", absorbed_output: "mla_output",
    angle: "rotation", trig: "rotation", Q_rot: "rotation", K_rot: "rotation", rms: "qk_norm", Q_norm: "qk_norm", K_norm: "qk_norm"};
  const ICONS = {exact: "✔", rounded: "✔", carried: "↪", "input-rounding": "✔", "too-coarse": "≈", "last-digit": "≈", wrong: "✘"};
  const TONES = {exact: "good", rounded: "good", carried: "carried", "input-rounding": "good", "too-coarse": "near", "last-digit": "near", wrong: "wrong", hand: "good"};
  const RIGHT = ["exact", "rounded", "input-rounding"];
  const $ = (id) => document.getElementById(id);
  let answer = null; // the last render answer: the shape of the boxes
  let byHand = null; // the same spec rendered with rounding = "hand": the steps to reveal
  let handSent = 0;
  let verdicts = {}; // "name/col" -> verdict of the last check
  let checkTimer = null, sent = 0, hintSent = 0;

  function page() { return window.symattnPage; }
  function progress() {
    const state = page().state();
    const p = state.practice = state.practice || {};
    if (!Number.isInteger(p.step) || p.step < 0 || (shape() && p.step >= steps().length)) p.step = 0;
    if (!p.answers || typeof p.answers !== "object") p.answers = {};
    if (!Array.isArray(p.revealed)) p.revealed = [];
    return p;
  }
  function token() { return (page().state().spec.tokens || [])[page().focusIndex()] || ""; }

  function shape() {
    let c = answer && answer.compute;
    if (!c) return null;
    if (c.values) c = c.values;
    if (!c.weights || !c.output || c.heads) return null;
    const blocks = c.running_max ? c.running_max.value.length : 0; // key blocks of the online softmax
    const width = (m) => (m.exact || m.value)[0].length;
    const mla = c.latent ? {route: c.mla_route === "absorbed" ? "absorbed" : "naive", dc: width(c.latent), dq: width(c.Q),
      dk: width(c.K), decoupled: Boolean(c.Q_rot)} : null; // Q_rot with MLA: the decoupled dims are turned
    // the turn: pairs of dims, the first turned column (MLA's decoupled dims are the last), whether angles are asked
    const turn = c.rope_cos ? {angles: Boolean(c.rope_angle), pairs: width(c.rope_cos), dk: width(c.Q_rot),
      first: width(c.Q_rot) - 2 * width(c.rope_cos), placed: Boolean(c.rope_key_cos), cross: Boolean(c.key_tokens && !c.positions)} : null;
    return {keys: c.key_tokens || c.tokens, tokens: c.tokens, queries: c.tokens.length, dv: c.output.value[0].length, blocks,
      size: blocks ? Number(c.block_keys) : 0, mla, turn, norm: c.Q_norm ? width(c.Q_norm) : 0};
  }
  // why the round has no steps for this spec (a sentence), or null
  function refused() {
    const c = answer && answer.compute && (answer.compute.values || answer.compute);
    if (c && c.heads) return page().phrases().practice.heads; // the boxes are one head's
    const s = shape();
    return s && s.turn && s.turn.cross ? page().phrases().practice.turn_positions : null;
  }

  // the round's steps: {id, block, parts: [{q, name, count, row}]}; a block's parts claim q[block][focus row],
  // a part with a row (1-based) claims q[row], the others the focus row's q
  function steps() {
    const s = shape();
    const part = (q) => ({q, name: q, count: s ? count(q, s) : 0, row: 0});
    const plain = (q) => (EVERY.includes(q) && s ? {id: q, block: 0, parts: s.tokens.map((t, r) => ({...part(q), name: `${q}[${r + 1}]`, row: r + 1}))}
      : s && (ROWS[q] || q === "rms") ? {id: q, block: 0, parts: byRow(q, s, part)}
      : {id: q, block: 0, parts: (PARTS[q] || [q]).map(part)});
    if (!s) return STEPS.map(plain);
    const before = withTurn(s, s.mla ? MLA[s.mla.route] : ["scores"]);
    if (!s.blocks) return [...before, "scaled", "exp", "exp_sum", "weights", s.mla && s.mla.route === "absorbed" ? "absorbed_output" : "output"].map(plain);
    const block = (b) => ({id: `block${b}`, block: b,
      parts: BLOCK.map((q) => ({q, name: `${q}[${b}]`, count: q === "accumulator" ? s.dv : 1, row: 0}))});
    const tiled = [...before, ...TILED.slice(1)];
    return tiled.flatMap((q) => (q === "block" ? Array.from({length: s.blocks}, (x, b) => block(b + 1)) : [plain(q)]));
  }
  // the turn's (or QK-norm's) steps, right before the scores or the absorbed query's step
  function withTurn(s, before) {
    const extra = s.turn ? (s.turn.angles ? TURN : TURN.slice(1)) : s.norm ? NORM : [];
    const at = before.indexOf(s.mla && s.mla.route === "absorbed" ? "absorbed" : "scores");
    return [...before.slice(0, at), ...extra, ...before.slice(at)];
  }
  // each token's (key's) row of the step's quantities; σ: the focus row's q, then each key's k
  function byRow(q, s, part) {
    const rows = q === "angle" || q === "trig" ? s.tokens : s.keys;
    const named = (name, r) => ({...part(name), name: `${name}[${r + 1}]`, row: r + 1});
    if (q === "rms") return [part("Q_rms"), ...rows.map((t, r) => named("K_rms", r))];
    const keyed = s.turn && s.turn.placed && KEYED[q] ? s.keys.flatMap((t, r) => KEYED[q].map((name) => named(name, r))) : [];
    return [...rows.flatMap((t, r) => ROWS[q].map((name) => named(name, r))), ...keyed];
  }
  function step() { return steps()[progress().step]; }
  function order() { return steps().flatMap((st) => st.parts.map((part) => part.name)); }

  function count(q, s) {
    const m = s.mla || {};
    const widths = {exp_sum: 1, output: s.dv, V: s.dv, Q: m.dq, K: m.dk, latent: m.dc, absorbed_query: m.dc, latent_output: m.dc,
      Q_rms: 1, K_rms: 1, Q_norm: s.norm, K_norm: s.norm};
    if (s.turn) Object.assign(widths, {rope_angle: s.turn.pairs, rope_cos: s.turn.pairs, rope_sin: s.turn.pairs,
      rope_key_angle: s.turn.pairs, rope_key_cos: s.turn.pairs, rope_key_sin: s.turn.pairs,
      Q_rot: s.turn.dk - s.turn.first, K_rot: s.turn.dk - s.turn.first});
    return q in widths ? widths[q] : s.keys.length;
  }
  // the first column a part's boxes claim (Q′ and K′ of MLA: the decoupled dims), and the claim's width
  function offset(part) { const s = shape(); return s && s.turn && (part.q === "Q_rot" || part.q === "K_rot") ? s.turn.first : 0; }
  function padded(part, typed) {
    const first = offset(part);
    if (!first) return typed;
    const row = Array(first).fill("");
    return [...row, ...typed];
  }
  // one number, kept as a string: the sum, and a block's m, rescale and l
  function single(part) { return ["exp_sum", "Q_rms", "K_rms"].includes(part.q) || (BLOCK.includes(part.q) && part.q !== "accumulator"); }

  function question(st) {
    const {phrases} = page();
    if (EVERY.includes(st.id)) return fill(phrases().practice.every, {quantity: phrases().quantity[st.id]});
    if (TURN.includes(st.id) || NORM.includes(st.id)) {
      const id = st.id === "trig" && !shape().turn.angles ? "trig_tables" : st.id; // given tables: read, not worked
      return fill(phrases().practice[id], {token: quote(token())});
    }
    const turned = st.id === "absorbed" && shape() && shape().mla.decoupled; // q′_R · k′_R is part of each score
    if (PARTS[st.id]) return fill(phrases().practice[turned ? "absorbed_turned" : st.id], {token: quote(token())});
    if (!st.block) return fill(phrases().practice.question, {quantity: phrases().quantity[st.id], token: quote(token())});
    const s = shape(), first = (st.block - 1) * s.size;
    const shown = s.keys.slice(first, first + s.size);
    const phrase = shown.length === 1 ? phrases().practice.block_one : phrases().practice.block;
    return fill(phrase, {block: st.block, keys: shown.map(quote).join(phrases().list_sep), token: quote(token())});
  }

  function caption(part, j, s, st) {
    const {ui, phrases} = page();
    const captions = phrases().practice.caption;
    const n = offset(part) + j + 1;
    if (["rope_angle", "rope_cos", "rope_sin"].includes(part.q)) return fill(captions[part.q === "rope_angle" ? "pair" : part.q.slice(5)], {token: s.tokens[part.row - 1], n});
    if (part.q.startsWith("rope_key_")) return fill(captions[part.q === "rope_key_angle" ? "key_pair" : "key_" + part.q.slice(9)], {token: s.keys[part.row - 1], n});
    if (part.q === "K_rms") return fill(captions.sigma_k, {token: s.keys[part.row - 1]});
    if (part.q === "Q_rms") return fill(captions.sigma_q, {token: token()});
    if (part.row) return fill(captions.row, {token: (EVERY.includes(part.q) ? s.tokens : s.keys)[part.row - 1], n});
    if (part.q === "Q_rot" || part.q === "Q_norm") return ui("check_column", {n});
    if (st.id === "absorbed_output" && part.q === "output") return fill(captions.o, {n: j + 1});
    if (BLOCK.includes(part.q) || part.q in PARTS_CAPTIONED) return fill(captions[part.q], {n: j + 1});
    if (part.q === "Q") return ui("check_column", {n: j + 1});
    return part.q === "exp_sum" ? phrases().quantity.exp_sum : part.q === "output" ? ui("check_column", {n: j + 1}) : s.keys[j];
  }

  function build() {
    const {ui, el} = page();
    const p = progress(), st = step(), s = shape(), all = steps();
    $("practice-progress").textContent = ui("practice_step", {n: p.step + 1, count: all.length});
    $("practice-question").textContent = question(st);
    $("practice-previous").disabled = p.step === 0;
    $("practice-next").disabled = p.step === all.length - 1;
    $("practice-hint").disabled = false;
    const boxes = [];
    for (const part of s ? st.parts : []) {
      const typed = p.answers[part.name];
      for (let j = 0; j < part.count; j++) {
        const id = st.block ? `practice-${part.q}-b${st.block}-${j}` : part.row ? `practice-${part.q}-r${part.row}-${j}` : `practice-${part.q}-${j}`;
        const value = single(part) ? (typeof typed === "string" ? typed : "") : (Array.isArray(typed) && typed[j] !== undefined ? typed[j] : "");
        boxes.push(el("div", {class: "box", id},
          el("label", {for: id + "-input", class: "caption", text: caption(part, j, s, st)}),
          el("input", {id: id + "-input", type: "text", value, size: 7, autocomplete: "off", spellcheck: "false",
            inputmode: "decimal", class: "claim", dataset: {name: part.name, col: String(offset(part) + j)}}),
          el("span", {class: "verdict", id: id + "-verdict"})));
      }
    }
    $("practice-boxes").replaceChildren(...boxes);
    const why = refused();
    if (why) { // no steps: nothing to count, answer or step through
      $("practice-progress").textContent = "";
      $("practice-next").disabled = $("practice-previous").disabled = $("practice-hint").disabled = true;
      $("practice-question").textContent = "";
      $("practice-boxes").replaceChildren();
      $("practice-error").textContent = why;
      $("practice-error").hidden = false;
    } else if ($("practice-error").dataset.refused) $("practice-error").hidden = true; // check() words its own errors
    $("practice-error").dataset.refused = why ? "true" : "";
    paint();
    showStep();
  }

  function fill(text, values) {
    const spaced = page().phrases().cjk_spacing;
    let out = "";
    for (const [i, piece] of String(text).split(/\{([a-z_]+)\}/).entries()) {
      const part = i % 2 ? (piece in values ? String(values[piece]) : `{${piece}}`) : piece;
      out = spaced ? join(out, part) : out + part;
    }
    return out;
  }

  // Chinese spaces a phrase and its values by what they hold, as symattn.rendering.phrases does
  function join(left, right) {
    const head = left.replace(/ +$/, ""), tail = right.replace(/^ +/, "");
    if (!head || !tail) return left + right;
    const kinds = new Set([kind(head.at(-1)), kind(tail[0])]);
    if (kinds.has("mark") || (kinds.size === 1 && kinds.has("han"))) return head + tail;
    return kinds.has("han") && kinds.has("latin") ? `${head} ${tail}` : left + right;
  }

  function kind(ch) {
    if (/[\u3000-\u303f\uff00-\uffef]/u.test(ch)) return "mark";
    if (/[\u2e80-\u2fff\u3040-\u9fff\uac00-\ud7af\uf900-\ufaff]/u.test(ch)) return "han";
    return /[\p{L}\p{N}$]/u.test(ch) ? "latin" : "other";
  }
  function quote(label) { return fill(page().phrases().practice.quote, {x: label}); }

  function remember() {
    const p = progress(), inputs = Array.from($("practice-boxes").querySelectorAll("input.claim"));
    for (const part of step().parts) {
      const values = inputs.filter((i) => i.dataset.name === part.name).map((i) => i.value);
      if (values.length) p.answers[part.name] = single(part) ? values[0] : values;
    }
  }

  function claims() {
    // every step answered so far: later verdicts may follow from the student's own earlier numbers
    const p = progress(), row = {}, out = {rows: {[token()]: row}}, i = page().focusIndex() + 1;
    for (const st of steps()) {
      for (const part of st.parts) {
        const typed = p.answers[part.name];
        const given = single(part) ? typeof typed === "string" && typed.trim() !== "" : Array.isArray(typed) && typed.length === part.count;
        if (!given) continue;
        if (st.block) out[`${part.q}[${st.block}][${i}]`] = typed;
        else if (part.row) out[`${part.q}[${part.row}]`] = single(part) ? typed : padded(part, typed);
        else if (FOCUS.includes(part.q)) out[`${part.q}[${i}]`] = single(part) ? typed : padded(part, typed); // not a row's quantity
        else row[part.q] = typed;
      }
    }
    return out;
  }

  function verdictName(q, row, col) {
    // where a verdict of the focus row goes: [name, column], or null; a block's rows are [block][row], the
    // accumulator's [block · queries + row][column] (check's places, 0-based)
    const focus = page().focusIndex(), s = shape();
    if (q === "accumulator") return s && row % s.queries === focus ? [`${q}[${Math.floor(row / s.queries) + 1}]`, col] : null;
    if (BLOCK.includes(q)) return col === focus ? [`${q}[${row + 1}]`, 0] : null;
    if (EVERY.includes(q)) return [`${q}[${row + 1}]`, col];
    if (BY_ROW.includes(q)) return [`${q}[${row + 1}]`, col === null ? 0 : col];
    return row === focus ? [q, col === null ? 0 : col] : null;
  }

  async function check() {
    const id = ++sent;
    if (refused()) return;
    const {ok, data} = await page().post("/api/check", {spec: page().state().spec, claims: claims(), html: false});
    if (id !== sent) return;
    verdicts = {};
    $("practice-error").hidden = ok;
    if (!ok) $("practice-error").textContent = data ? data.error : page().ui("offline");
    else {
      data.claims.forEach((claim, k) => {
        const place = verdictName(...data.places[k]);
        if (place) verdicts[`${place[0]}/${place[1]}`] = claim;
      });
    }
    paint();
    document.body.dataset.practiceChecked = String(id);
  }

  function answered() {
    const inputs = Array.from($("practice-boxes").querySelectorAll("input.claim"));
    return inputs.length > 0 && inputs.every((input) => input.value.trim() !== "" && verdicts[`${input.dataset.name}/${input.dataset.col}`]);
  }

  function isRight(name, claim, names) {
    return RIGHT.includes(claim.verdict) || (claim.verdict === "carried" && allRightBefore(name, names));
  }

  function allRightBefore(name, names) {
    const before = names.slice(0, names.indexOf(name));
    return Object.entries(verdicts).every(([key, c]) => {
      const other = key.slice(0, key.lastIndexOf("/"));
      return !before.includes(other) || isRight(other, c, names);
    });
  }

  function shownVerdict(name, claim) {
    // the hand chain: carried from the student's own numbers, and every number before it in the row right
    return claim.verdict === "carried" && allRightBefore(name, order()) ? "hand" : claim.verdict;
  }

  function paint() {
    const words = page().phrases();
    for (const input of $("practice-boxes").querySelectorAll("input.claim")) {
      const box = input.closest(".box");
      const claim = verdicts[`${input.dataset.name}/${input.dataset.col}`];
      const shown = claim ? shownVerdict(input.dataset.name, claim) : "";
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
    const p = progress(), st = step(), target = $("practice-step");
    const kinds = (byHand && byHand.kinds) || [];
    const headings = byHand ? byHand.holder.querySelectorAll(":scope > h2") : [];
    const s = shape(), tiled = st.block || (s && s.blocks && st.id === "output"); // O = acc / l: the tiles' step
    const k = kinds.indexOf(KINDS[tiled ? "block" : st.id]);
    if (!p.revealed.includes(st.id) || k < 0 || headings.length !== kinds.length || !answered()) {
      target.hidden = true;
      target.replaceChildren();
      return;
    }
    const nodes = [];
    for (let node = headings[k]; node && !(node !== headings[k] && node.tagName === "H2"); node = node.nextElementSibling) {
      if (!node.classList.contains("copy-latex")) nodes.push(node.cloneNode(true));
    }
    const shown = cut(nodes, st.id);
    target.replaceChildren(...shown);
    target.hidden = !shown.length;
  }

  function cut(nodes, id) {
    // the MLA step up to the display of the matrix asked (CUTS), or whole
    if (!CUTS[id]) return nodes;
    const tex = (node) => Array.from(node.querySelectorAll("annotation")).map((a) => a.textContent).join(" ") || node.textContent;
    let end = -1;
    nodes.forEach((node, n) => { if (CUTS[id].some((mark) => tex(node).includes(mark))) end = n; });
    return nodes.slice(0, end + 1);
  }

  async function hint() {
    const id = ++hintSent;
    remember();
    const st = step(), asked = st.block ? {quantity: "block", block: st.block} : {quantity: st.id};
    const {ok, data} = await page().post("/api/hint", {spec: page().state().spec, ...asked, claims: claims()});
    if (id !== hintSent) return;
    const box = $("practice-hint-text");
    if (!ok) { $("practice-error").textContent = data ? data.error : page().ui("offline"); $("practice-error").hidden = false; return; }
    const holder = document.createElement("div");
    holder.innerHTML = data.html; // the server's fragment: the student's numbers in it passed the claims reader
    page().typeset(holder);
    box.replaceChildren(...holder.childNodes);
    box.hidden = false;
    box.dataset.quantity = st.id;
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
      if (!p.revealed.includes(step().id)) p.revealed.push(step().id);
      page().save();
      showStep();
    };
    $("practice-next").onclick = () => go(Math.min(progress().step + 1, steps().length - 1));
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
