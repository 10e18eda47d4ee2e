"""Exercises for a class: one variant of a template per student, drawn so that it suits hand work.

A template is a spec (TOML file or mapping) with a ``[vary]`` table that says how
numbers are drawn, and optionally ``ask`` and ``answer_rows``::

    title = "Homework 3"
    tokens = ["the", "cat", "sat"]
    ask = ["scores", "scaled", "weights", "output"]   # default; also "sqrt_dk", "exp", "exp_sum"
    answer_rows = "focus"                             # or "all"
    [vary]
    d_k = 2                                           # or a list to draw from: [2, 3]
    d_v = 2
    Q = { range = [-1, 1], step = 0.1 }
    K = { range = [-1, 1], step = 0.1, nonzero = true }
    V = { range = [0, 10], step = 1, fixed = { "1,2" = "5" } }   # entry (row 1, column 2), 1-based
    tokens = { choose = [["the", "cat", "sat"], ["a", "dog", "ran"]] }
    min_gap = "0.02"                                  # the focus row's weights differ by at least this
    tries = 200                                       # redraws before giving up

Numbers are exact decimals: ``lo + k·step`` for a whole ``k``, never floats.
Each variant is drawn from ``random.Random(variant_seed)`` where::

    variant_seed = int.from_bytes(sha256(f"{class_seed}:{student_id}".encode()).digest()[:8], "big")

so the same template, class seed and ids give the same variants in any process.

A draw is kept only when, in hand-rounding mode, all of these hold (else it is
drawn again, at most ``tries`` times):

``zero-row``     no row of Q, K or V is all zeros;
``tie``          every row has a unique largest score (so a unique largest weight), also as shown;
``gap``          the focus row's shown weights differ pairwise by at least ``min_gap``;
``hand-digits``  the hand chain shows the same digits as the exact values, for every number of every row;
``boundary``     no exact value shown in the key lies within 10⁻⁹ of a rounding boundary at its decimals
                 (decided exactly: rationals directly, other values by ``Model.compare``).
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from symattn.input.decimals import round_half_up, terminating_decimals
from symattn.input import limits
from symattn.input.errors import EvaluationError, LimitError, SpecError
from symattn.exact.model import Model, build_model
from symattn.exact.rounding import exact_figures, hand_figures
from symattn.input.spec import Spec, _kind, _Reader, read_table, spec_from_mapping

ASKABLE = ("sqrt_dk", "scores", "scaled", "exp", "exp_sum", "weights", "output")
DEFAULT_ASK = ("scores", "scaled", "weights", "output")
ANSWER_ROWS = ("focus", "all")
MATRICES = ("Q", "K", "V")
VARY_KEYS = MATRICES + ("tokens", "d_k", "d_v", "min_gap", "tries")
RULE_KEYS = ("range", "step", "nonzero", "fixed")
TEMPLATE_KEYS = ("vary", "ask", "answer_rows")
CONDITIONS = ("zero-row", "tie", "gap", "hand-digits", "boundary")
TRIES = 200
MAX_TRIES = 10_000
MIN_GAP = Fraction(2, 100)
BOUNDARY = Fraction(1, 10**9)


@dataclass(frozen=True)
class Asked:
    """One asked number: its claims key (1-based, as in answers.toml) and where it stands (0-based)."""

    key: str
    quantity: str
    row: int | None
    col: int | None


@dataclass(frozen=True)
class Variant:
    """One student's exercise: their numbers as spec keys, the validated spec, and what is asked."""

    id: str
    name: str
    seed: int  # the variant seed (see the module's docstring)
    data: tuple[tuple[str, Any], ...]  # spec keys in a fixed order, numbers as decimal strings
    spec: Spec  # rounding = "hand": the key is the hand chain
    asked: tuple[Asked, ...]  # in the order of the derivation
    tries: int  # draws it took

    @property
    def mapping(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass(frozen=True)
class _Rule:
    lo: Fraction
    count: int  # values lo, lo + step, ..., lo + count·step
    step: Fraction
    decimals: int
    nonzero: bool
    fixed: tuple[tuple[tuple[int, int], str], ...]  # ((row, col) 0-based, text)


@dataclass(frozen=True)
class Template:
    base: tuple[tuple[str, Any], ...]  # the spec keys of the template, without the exercise keys
    rules: tuple[tuple[str, _Rule], ...]
    tokens: tuple[tuple[str, ...], ...]  # lists to choose from (one list: fixed)
    d_k: tuple[int, ...]
    d_v: tuple[int, ...]
    ask: tuple[str, ...]
    answer_rows: str
    min_gap: Fraction
    tries: int
    source: str


def variant_seed(class_seed: int | str, student_id: str) -> int:
    """The documented per-student seed: the first 8 bytes of SHA-256 of ``"<class_seed>:<student_id>"``."""
    return int.from_bytes(hashlib.sha256(f"{class_seed}:{student_id}".encode("utf-8")).digest()[:8], "big")


# --- reading a template ------------------------------------------------------

def load_template(template: str | Path | Mapping[str, Any] | Template) -> Template:
    if isinstance(template, Template):
        return template
    if isinstance(template, Mapping):
        return _template(template, "<dict>")
    return _template(read_table(template), str(template))


def _exact(reader: _Reader, raw: object, key: str, position: tuple[int, ...] = ()) -> Fraction:
    if isinstance(raw, float) and not isinstance(raw, str):
        raise reader.error(key, f"give an exact number (a string such as \"0.1\"), got the float {raw!r}", position)
    return reader.number(raw, key, position).value


def _whole(reader: _Reader, raw: object, key: str, low: int, high: int) -> tuple[int, ...]:
    values = raw if isinstance(raw, list) else [raw]
    if not values:
        raise reader.error(key, "expected a whole number or a non-empty list of them")
    out = []
    for i, x in enumerate(values, 1):
        if isinstance(x, bool) or not isinstance(x, int) or not low <= x <= high:
            raise reader.error(key, f"expected a whole number from {low} to {high}, got {x!r}",
                               (i,) if isinstance(raw, list) else ())
        out.append(x)
    return tuple(out)


def _rule(reader: _Reader, name: str, raw: object) -> _Rule:
    key = f"vary.{name}"
    if not isinstance(raw, Mapping):
        raise reader.error(key, f"expected a table such as {{ range = [-1, 1], step = 0.1 }}, got {_kind(raw)}")
    for k in raw:
        if k not in RULE_KEYS:
            raise reader.error(f"{key}.{k}", "unknown key; expected one of " + ", ".join(RULE_KEYS))
    bounds = raw.get("range")
    if not isinstance(bounds, list) or len(bounds) != 2:
        raise reader.error(f"{key}.range", f"expected [low, high], got {_kind(bounds)}")
    lo, hi = (_exact(reader, x, f"{key}.range", (i,)) for i, x in enumerate(bounds, 1))
    if hi < lo:
        raise reader.error(f"{key}.range", "high is below low")
    if "step" not in raw:
        raise reader.error(f"{key}.step", "missing (e.g. step = 0.1 for one decimal)")
    step = _exact(reader, raw["step"], f"{key}.step")
    decimals = terminating_decimals(step) if step > 0 else None
    if decimals is None:
        raise reader.error(f"{key}.step", "expected a positive terminating decimal such as 0.1 or 1")
    span = (hi - lo) / step
    if span.denominator != 1 or (lo / step).denominator != 1:
        raise reader.error(f"{key}.range", "low and high must be whole multiples of step")
    nonzero = raw.get("nonzero", False)
    if not isinstance(nonzero, bool):
        raise reader.error(f"{key}.nonzero", f"expected true or false, got {_kind(nonzero)}")
    if nonzero and lo == hi == 0:
        raise reader.error(f"{key}.range", "nonzero leaves no value to draw")
    fixed_raw = raw.get("fixed", {})
    if not isinstance(fixed_raw, Mapping):
        raise reader.error(f"{key}.fixed", f"expected a table such as {{ \"1,2\" = \"0.5\" }}, got {_kind(fixed_raw)}")
    fixed = []
    for where, value in fixed_raw.items():
        parts = str(where).split(",")
        if len(parts) != 2 or not all(p.strip().isascii() and p.strip().isdigit() and int(p) >= 1 for p in parts):
            raise reader.error(f"{key}.fixed.{where}", "expected \"row,column\", 1-based, such as \"1,2\"")
        text = value if isinstance(value, str) else None
        if text is None or isinstance(value, bool):
            raise reader.error(f"{key}.fixed.{where}", f"expected a number as a string, got {_kind(value)}")
        _exact(reader, text, f"{key}.fixed.{where}")
        fixed.append(((int(parts[0]) - 1, int(parts[1]) - 1), str(text).strip()))
    return _Rule(lo, int(span), step, decimals, nonzero, tuple(sorted(fixed)))


def _template(data: Mapping[str, Any], source: str) -> Template:
    reader = _Reader(source)
    if not isinstance(data, Mapping):
        raise reader.error(None, f"expected a table, got {_kind(data)}")
    if "vary" not in data:
        raise reader.error("vary", "missing: a template needs a [vary] table that says how numbers are drawn")
    vary = data["vary"]
    if not isinstance(vary, Mapping):
        raise reader.error("vary", f"expected a table, got {_kind(vary)}")
    for k in vary:
        if k not in VARY_KEYS:
            raise reader.error(f"vary.{k}", "unknown key; expected one of " + ", ".join(VARY_KEYS))
    for k in ("X", "heads", "W_O"):
        if k in data:
            raise reader.error(k, "exercises draw Q, K and V directly; projections and heads are not supported")
    base = {k: v for k, v in data.items() if k not in TEMPLATE_KEYS}
    rules = tuple((name, _rule(reader, name, vary[name])) for name in MATRICES if name in vary)
    for name in MATRICES:
        if name not in vary and name not in base:
            raise reader.error(f"vary.{name}", f"missing: give {name} in the template or a rule to draw it")
    if "tokens" in vary:
        choose = vary["tokens"]
        lists = choose.get("choose") if isinstance(choose, Mapping) else None
        if not isinstance(lists, list) or not lists or not all(isinstance(x, list) and x for x in lists):
            raise reader.error("vary.tokens", "expected { choose = [[\"a\", \"b\"], ...] }")
        if len({len(x) for x in lists}) != 1:
            raise reader.error("vary.tokens.choose", "every list of tokens needs the same length")
        for i, labels in enumerate(lists, 1):
            reader.labels(labels, "vary.tokens.choose", len(labels), "Q")
        tokens = tuple(tuple(x) for x in lists)
    elif "tokens" in base:
        tokens = (tuple(reader.labels(base["tokens"], "tokens", len(base["tokens"]) if isinstance(
            base["tokens"], list) else 0, "Q")),)
    elif "Q" in base:
        tokens = ()
    else:
        raise reader.error("tokens", "missing: the tokens decide how many rows are drawn")
    d_k = _whole(reader, vary.get("d_k", _width(base, "Q", 2)), "vary.d_k", 1, 16)
    d_v = _whole(reader, vary.get("d_v", _width(base, "V", 2)), "vary.d_v", 1, 16)
    ask = data.get("ask", list(DEFAULT_ASK))
    if not isinstance(ask, list) or not ask:
        raise reader.error("ask", f"expected a non-empty list of quantities, got {_kind(ask)}")
    for i, q in enumerate(ask, 1):
        if q not in ASKABLE:
            raise reader.error("ask", f"unknown quantity {q!r}; expected one of " + ", ".join(ASKABLE), (i,))
    answer_rows = reader.choice(data.get("answer_rows", "focus"), "answer_rows", ANSWER_ROWS)
    min_gap = _exact(reader, vary["min_gap"], "vary.min_gap") if "min_gap" in vary else MIN_GAP
    if min_gap < 0:
        raise reader.error("vary.min_gap", "must not be negative")
    tries = _whole(reader, vary.get("tries", TRIES), "vary.tries", 1, MAX_TRIES)[0]
    ordered_ask = tuple(q for q in ASKABLE if q in ask)
    return Template(tuple(base.items()), rules, tokens, d_k, d_v, ordered_ask, answer_rows, min_gap, tries, source)


def _width(base: Mapping[str, Any], name: str, default: int) -> int:
    m = base.get(name)
    return len(m[0]) if isinstance(m, list) and m and isinstance(m[0], list) else default


# --- drawing -----------------------------------------------------------------

def _number(rule: _Rule, rng: random.Random) -> str:
    while True:
        value = rule.lo + rng.randrange(rule.count + 1) * rule.step
        if not (rule.nonzero and value == 0):
            return format(round_half_up(value, rule.decimals), "f")


def _draw(t: Template, rng: random.Random) -> dict[str, Any]:
    data = dict(t.base)
    if t.tokens:
        data["tokens"] = list(t.tokens[rng.randrange(len(t.tokens))]) if len(t.tokens) > 1 else list(t.tokens[0])
    n = len(data["tokens"]) if "tokens" in data else len(data["Q"])
    d_k = t.d_k[rng.randrange(len(t.d_k))] if len(t.d_k) > 1 else t.d_k[0]
    d_v = t.d_v[rng.randrange(len(t.d_v))] if len(t.d_v) > 1 else t.d_v[0]
    for name, rule in t.rules:
        width = d_v if name == "V" else d_k
        rows = [[_number(rule, rng) for _ in range(width)] for _ in range(n)]
        for (i, j), text in rule.fixed:
            if i < n and j < width:
                rows[i][j] = text
        data[name] = rows
    data["rounding"] = "hand"
    order = [k for k in ("title", "lang", "tokens", "focus", "Q", "K", "V") if k in data]
    return {k: data[k] for k in order + [k for k in data if k not in order]}


def asked(spec: Spec, ask: Sequence[str], answer_rows: str) -> tuple[Asked, ...]:
    """Every asked number, in the order of the derivation (quantity, then row, then column)."""
    rows = _rows(spec, answer_rows)
    out = []
    for q in ask:
        if q == "sqrt_dk":
            if spec.scale == "sqrt":
                out.append(Asked("sqrt_dk", q, None, None))
            continue
        cols = (None,) if q == "exp_sum" else range(len(spec.V[0]) if q == "output" else len(spec.K))
        for i in rows:
            for j in cols:
                key = f"{q}[{i + 1}]" + ("" if j is None else f"[{j + 1}]")
                out.append(Asked(key, q, i, j))
    return tuple(out)


def _failed(spec: Spec, t: Template) -> str | None:
    """The first hand-work condition the draw breaks, or None."""
    for m in (spec.Q, spec.K, spec.V):
        if any(all(x.value == 0 for x in row) for row in m):
            return "zero-row"
    model = build_model(spec)
    den, scores = model.score_integers
    for i, row in enumerate(scores):
        allowed = [x for j, x in enumerate(row) if model.may_attend(i, j)]
        if allowed.count(max(allowed)) > 1:
            return "tie"
    try:
        exact = exact_figures(model, spec.decimals, stable=spec.softmax == "stable", notation=spec.notation)
        hand = hand_figures(model, spec)
    except (SpecError, EvaluationError):
        return "hand-digits"
    for row in exact.weights:
        shown = [w.value for w in row]
        if shown.count(max(shown)) > 1:
            return "tie"
    focus = sorted(Fraction(w.value) for w in exact.weights[spec.focus])
    if any(b - a < t.min_gap for a, b in zip(focus, focus[1:])):
        return "gap"
    if not _same_digits(exact, hand, t.ask, _rows(spec, t.answer_rows)):
        return "hand-digits"
    if _near_boundary(model, spec, exact):
        return "boundary"
    return None


def _rows(spec: Spec, answer_rows: str) -> tuple[int, ...]:
    return tuple(range(len(spec.Q))) if answer_rows == "all" else (spec.focus,)


def _entries(fig, quantity: str, rows: Sequence[int]) -> list:
    if quantity == "sqrt_dk":
        return [fig.sqrt_dk]
    if quantity == "exp_sum":
        return [fig.exp_sum[i] for i in rows]
    table = getattr(fig, quantity)
    return [x for i in rows for x in table[i]]


def _same_digits(exact, hand, ask: Sequence[str], rows: Sequence[int]) -> bool:
    """Whether the hand chain, rounded to the decimals the exact value shows, gives the same digits.

    (By hand a sum of shown terms is shown whole, e.g. 4.689 where the exact output shows 4.7.)
    """
    for quantity in ask:
        for e, h in zip(_entries(exact, quantity, rows), _entries(hand, quantity, rows)):
            if e.scientific or h.scientific or e.is_infinite or h.is_infinite:
                if format(e.value, "f") != format(h.value, "f"):
                    return False
                continue
            places = max(0, -e.value.as_tuple().exponent)
            if round_half_up(Fraction(h.value), places) != e.value or \
                    -h.value.as_tuple().exponent < places:
                return False
    return True


def _near_boundary(model: Model, spec: Spec, exact) -> bool:
    d = spec.decimals
    shown = {"sqrt_dk": ((exact.sqrt_dk,),), "scaled": exact.scaled, "exp": exact.exp,
             "exp_sum": tuple((x,) for x in exact.exp_sum), "weights": exact.weights, "output": exact.output}
    places = {"sqrt_dk": d.sqrt_dk, "scaled": d.scaled, "exp": d.exp, "exp_sum": d.exp, "weights": d.weights,
              "output": d.output}
    for quantity, rows in shown.items():
        half = Fraction(1, 2) * Fraction(10) ** -places[quantity]
        rationals = model.rationals(quantity)
        for i, row in enumerate(rows):
            for j, num in enumerate(row):
                if num.is_infinite or num.exact or num.scientific:
                    continue
                r = Fraction(num.value)
                for bound in (r - half, r + half):  # the rounding boundaries around the shown value
                    value = rationals[i][j]
                    try:
                        if value is not None:
                            near = abs(value - bound) < BOUNDARY
                        else:
                            near = model.compare(quantity, i, j, bound - BOUNDARY) > 0 and \
                                model.compare(quantity, i, j, bound + BOUNDARY) < 0
                    except EvaluationError:
                        near = True
                    if near:
                        return True
    return False


def draw(template: str | Path | Mapping[str, Any] | Template, seed: int, student_id: str = "",
         name: str = "") -> Variant:
    """One variant from a variant seed: redrawn until every hand-work condition holds."""
    t = load_template(template)
    rng = random.Random(seed)
    failures = {c: 0 for c in CONDITIONS}
    for attempt in range(1, t.tries + 1):
        data = _draw(t, rng)
        spec = spec_from_mapping(data, t.source)
        problem = _failed(spec, t)
        if problem is None:
            return Variant(student_id, name, seed, tuple(data.items()), spec,
                           asked(spec, t.ask, t.answer_rows), attempt)
        failures[problem] += 1
    worst = max(CONDITIONS, key=lambda c: failures[c])
    raise SpecError(t.source, "vary", f"no draw suits hand work after {t.tries} tries; most failed: {worst} "
                    f"({failures[worst]} times); widen the ranges or change the step")


def exercise(template: str | Path | Mapping[str, Any] | Template, ids: Iterable[str | tuple[str, str]],
             seed: int | str, progress: Callable[[Sequence[Any]], Iterable[Any]] | None = None
             ) -> tuple[Variant, ...]:
    """One variant per student id (or (id, name) pair), from the class seed.

    ``progress`` wraps the list of students (the CLI passes a progress bar on a terminal).
    """
    t = load_template(template)
    out = []
    seen: set[str] = set()
    entries = list(ids)
    if len(entries) > limits.STUDENTS:
        raise LimitError(t.source, "ids", f"{len(entries)} students; an exercise has at most {limits.STUDENTS}")
    for i, entry in enumerate(progress(entries) if progress else entries, 1):
        student, name = (entry, "") if isinstance(entry, str) else (str(entry[0]), str(entry[1]))
        if student in seen:
            raise SpecError(t.source, "ids", f"duplicate student id {student!r}", (i,))
        check_student_id(student, t.source, "ids", i)
        seen.add(student)
        out.append(draw(t, variant_seed(seed, student), student, name))
    return tuple(out)


# --- the files of one student ---------------------------------------------------

FORMATS = ("markdown", "latex", "pdf", "html")
EXTENSIONS = {"markdown": "md", "latex": "tex", "pdf": "pdf", "html": "html"}


@dataclass(frozen=True)
class SheetView:
    """What a sheet template shows: plain data, no strings but the user's own."""

    id: str
    name: str
    title: str | None
    tokens: tuple[str, ...]
    focus: int
    scale: str
    scale_value: Any
    d_k: int
    Q: Any
    K: Any
    V: Any
    asked: tuple[Asked, ...]
    all_rows: bool
    decimals: tuple[tuple[str, int], ...]  # (quantity, decimals) of asked quantities that are rounded


def _sheet_view(v: Variant) -> SheetView:
    spec = v.spec
    rounded = {"sqrt_dk": spec.decimals.sqrt_dk, "scaled": spec.decimals.scaled, "exp": spec.decimals.exp,
               "exp_sum": spec.decimals.exp, "weights": spec.decimals.weights, "output": spec.decimals.output}
    quantities = []
    for a in v.asked:
        if a.quantity in rounded and a.quantity not in quantities:
            quantities.append(a.quantity)
    scale = spec.scale if isinstance(spec.scale, str) else "number"
    return SheetView(v.id, v.name, spec.title, spec.tokens, spec.focus, scale,
                     None if isinstance(spec.scale, str) else spec.scale, spec.d_k, spec.Q, spec.K, spec.V, v.asked,
                     len(v.asked) > 0 and len({a.row for a in v.asked if a.row is not None}) > 1,
                     tuple((q, rounded[q]) for q in quantities))


def _with_lang(v: Variant, lang: str | None) -> Variant:
    return v if lang is None else replace(v, spec=v.spec.with_options(lang=lang))


def sheet(v: Variant, fmt: str = "markdown", lang: str | None = None) -> str | bytes:
    """The exercise sheet: the student's numbers and a blank for every asked number."""
    from symattn.rendering.renderer import has_cjk, render_template
    v = _with_lang(v, lang)
    spec = v.spec
    view = _sheet_view(v)
    if fmt in ("markdown", "html"):
        text = render_template("sheet", "markdown", spec.lang, s=view)
        if fmt == "html":
            from symattn.rendering.html import page
            return page(text, spec.lang)
        return text
    tex = render_template("sheet", "latex", spec.lang, s=view, has_cjk=has_cjk(
                          list(spec.tokens) + [spec.title or "", v.name, v.id]), paper=spec.page,
                          cjk_font=spec.cjk_font)
    if fmt == "pdf":
        from symattn.rendering.pdf import latex_to_pdf
        return latex_to_pdf(tex, engine=spec.engine, lang=spec.lang)
    return tex


def answer_values(v: Variant) -> tuple[Any, ...]:
    """Each asked number as the sheet asks for it (its decimals), in the order of the sheet's boxes.

    The exact values, rounded; the draw made sure the hand chain shows the same digits.
    """
    spec = v.spec
    fig = exact_figures(build_model(spec), spec.decimals, stable=spec.softmax == "stable", notation=spec.notation)
    out = []
    for a in v.asked:
        if a.quantity == "sqrt_dk":
            out.append(fig.sqrt_dk)
        elif a.quantity == "exp_sum":
            out.append(fig.exp_sum[a.row])
        else:
            out.append(getattr(fig, a.quantity)[a.row][a.col])
    return tuple(out)


def key(v: Variant, fmt: str = "markdown", lang: str | None = None) -> str | bytes:
    """The worked solution: the answers as the sheet asks for them, then the derivation in hand-rounding mode."""
    return _keys([v], fmt, lang, single=True)


def key_all(variants: Sequence[Variant], fmt: str = "markdown", lang: str | None = None) -> str | bytes:
    """Every student's key in one document, for the teacher (LaTeX and PDF: one student per page)."""
    if not variants:
        raise SpecError("ids", None, "no students: nothing to put in the keys")
    return _keys(variants, fmt, lang, single=False)


def _keys(variants: Sequence[Variant], fmt: str, lang: str | None, single: bool) -> str | bytes:
    from symattn.derivation.derive import derive
    from symattn.rendering.renderer import has_cjk, render, render_template
    variants = [_with_lang(v, lang) for v in variants]
    first = variants[0].spec
    body = "latex" if fmt in ("latex", "pdf") else "markdown"
    depth = 1 if body == "latex" or single else 2
    keys = [(v, tuple(zip(v.asked, answer_values(v))), render(derive(v.spec), body, depth=depth).strip("\n"))
            for v in variants]
    texts = [v.name for v in variants] + [first.title or ""] + [x for v in variants for x in v.spec.tokens]
    text = render_template("keys", body, first.lang, keys=keys, title=first.title, paper=first.page, single=single,
                           cjk_font=first.cjk_font, has_cjk=has_cjk(texts))
    if fmt == "html":
        from symattn.rendering.html import page
        return page(text, first.lang)
    if fmt == "pdf":
        from symattn.rendering.pdf import latex_to_pdf
        return latex_to_pdf(text, engine=first.engine, lang=first.lang)
    return text


def answers(v: Variant, lang: str | None = None) -> str:
    """A claims file to fill in: the student's id and inputs inline, every asked number as ``""``."""
    from symattn.rendering.tomlwrite import toml_key, toml_value
    data = dict(v.data)
    if lang is not None:
        data["lang"] = lang
    lines = [f"# {v.spec.title or 'symattn exercise'}: answers of {v.id}. Replace each \"\" with your number "
             "(keep the inputs as they are), then: symattn check answers.toml",
             f"student = {toml_value(v.id)}"]
    lines += [f"{toml_key(k)} = {toml_value(x)}" for k, x in data.items()]
    lines += ["", "[claims]"] + [f"{toml_key(a.key)} = \"\"" for a in v.asked]
    return "\n".join(lines) + "\n"


def files(v: Variant, fmt: str = "markdown", lang: str | None = None) -> tuple[tuple[str, str | bytes], ...]:
    """The files of one student, as (name, content): sheet, key, answers.toml."""
    ext = EXTENSIONS[fmt]
    return ((f"sheet.{ext}", sheet(v, fmt, lang)), (f"key.{ext}", key(v, fmt, lang)),
            ("answers.toml", answers(v, lang)))


_STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_student_id(student: str, source: str, key: str, position: int) -> str:
    """A student id as exercise allows it: it names the student's folder and feedback file, so it is plain."""
    if not _STUDENT_ID.fullmatch(student):
        raise SpecError(source, key, "expected an id of at most 64 letters, digits, '.', '_' or '-', starting "
                                     f"with a letter or digit, got {student!r}", (position,))
    return student


def read_roster(path: str | Path) -> list[tuple[str, str]]:
    """Students from a CSV file with an ``id,name`` header; ids become folder names, so they are plain."""
    from symattn.input.csvfile import read_csv
    header, rows = read_csv(path, "a roster", quoted=False)
    if len(rows) > limits.STUDENTS:
        raise LimitError(str(path), "id", f"{len(rows)} students; an exercise has at most {limits.STUDENTS}")
    if not rows or "id" not in header:
        raise SpecError(str(path), "id", "expected a CSV file with an id,name header and one student per line")
    return [(check_student_id((row.get("id") or "").strip(), str(path), "id", line), (row.get("name") or "").strip())
            for line, row in enumerate(rows, 2)]


def class_files(variants: Sequence[Variant], template: bytes, fmt: str = "markdown", lang: str | None = None,
                progress: Callable[[Sequence[Variant]], Iterable[Variant]] | None = None
                ) -> tuple[tuple[str, bytes], ...]:
    """Every file of a class as (path relative to the class folder, bytes), made before anything is written.

    Each student's ``<id>/sheet.*``, ``<id>/key.*`` and ``<id>/answers.toml``; ``key-all.*`` (every key in
    one document); ``index.csv`` (id, name, variant seed, SHA-256 of each file); ``template.toml``, so that
    ``symattn grade DIR`` can rebuild every variant. ``progress`` wraps the students (a bar on a terminal).
    """
    from symattn.input.csvfile import csv_text
    ext = EXTENSIONS[fmt]
    names = (f"sheet.{ext}", f"key.{ext}", "answers.toml")
    lines = [["id", "name", "seed"] + [f"{name}_sha256" for name in names]]
    out = []
    for v in (progress(variants) if progress else variants):
        digests = []
        for name, content in files(v, fmt, lang):
            data = content if isinstance(content, bytes) else content.encode("utf-8")
            out.append((f"{v.id}/{name}", data))
            digests.append(hashlib.sha256(data).hexdigest())
        lines.append([v.id, v.name, str(v.seed)] + digests)
    every = key_all(variants, fmt, lang)
    out.append((f"key-all.{ext}", every if isinstance(every, bytes) else every.encode("utf-8")))
    out.append(("index.csv", csv_text(lines[0], lines[1:]).encode("utf-8")))
    out.append(("template.toml", template))
    return tuple(out)


def write_class(variants: Sequence[Variant], folder: str, template_path: str | Path, fmt: str = "markdown",
                lang: str | None = None, progress: Callable[[Sequence[Variant]], Iterable[Variant]] | None = None,
                force: bool = False) -> None:
    """The class's files (see :func:`class_files`) in ``folder``; nothing is written if any file fails to build.

    A folder that already holds files is refused unless ``force``: it may hold answers students filled in.
    """
    from symattn.rendering.output import check_folder, write_files
    check_folder(folder, force, "returned answers", "the class")
    try:
        template = Path(template_path).read_bytes()
    except OSError as exc:
        raise SpecError(str(template_path), None, f"cannot read file: {exc.strerror or exc}") from None
    write_files(folder, class_files(variants, template, fmt, lang, progress))


__all__ = ["Asked", "Variant", "Template", "answer_values", "answers", "asked", "class_files", "draw", "exercise", "files", "key",
           "key_all", "load_template",
           "read_roster", "sheet", "variant_seed", "write_class"]

