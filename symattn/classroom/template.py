"""Reading an exercise template: a spec with a ``[vary]`` table that says how numbers are drawn.

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
How a variant is drawn from a template: :mod:`symattn.classroom.variants`.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import symattn.classroom.mla_sheet as mla_sheet
from symattn import variants
from symattn.input.decimals import terminating_decimals
from symattn.input.errors import brief
from symattn.input.files import kind_of, read_table
from symattn.input.reader import Reader
from symattn.input.records import record

ASKABLE = (
    "sqrt_dk",
    "latent",
    "absorbed_query",
    "scores",
    "scaled",
    "exp",
    "exp_sum",
    "weights",
    "latent_output",
    "output",
)
DEFAULT_ASK = ("scores", "scaled", "weights", "output")
ANSWER_ROWS = ("focus", "all")
MATRICES = ("Q", "K", "V")
VARY_KEYS = MATRICES + ("mla", "tokens", "d_k", "d_v", "min_gap", "tries")
RULE_KEYS = ("range", "step", "nonzero", "fixed")
TEMPLATE_KEYS = ("vary", "ask", "answer_rows")
# keys that change the numbers but that a sheet does not put into words: a student could not work them
# (the variants' own: symattn.variants; a mask part's with the layout's)
_MASK_KEYS = tuple(key for part in variants.mask_parts() for key in part.unstated)
UNSTATED = ("key_tokens", "kv_heads", *_MASK_KEYS, "subs", "inputs", "backward") + tuple(
    key for key in variants.UNSTATED if key not in _MASK_KEYS
)
TRIES = 200
MAX_TRIES = 10_000
MIN_GAP = Fraction(2, 100)


@record
class Rule:
    lo: Fraction
    count: int  # values lo, lo + step, ..., lo + count·step
    step: Fraction
    decimals: int
    nonzero: bool
    fixed: tuple[tuple[tuple[int, int], str], ...]  # ((row, col) 0-based, text)


@record
class Template:
    base: tuple[tuple[str, Any], ...]  # the spec keys of the template, without the exercise keys
    rules: tuple[tuple[str, Rule], ...]
    tokens: tuple[tuple[str, ...], ...]  # lists to choose from (one list: fixed)
    d_k: tuple[int, ...]
    d_v: tuple[int, ...]
    ask: tuple[str, ...]
    answer_rows: str
    min_gap: Fraction
    tries: int
    source: str


def load_template(template: str | Path | Mapping[str, Any] | Template) -> Template:
    if isinstance(template, Template):
        return template
    if isinstance(template, Mapping):
        return _template(template, "<dict>")
    return _template(read_table(template), str(template))


def _exact(reader: Reader, raw: object, key: str, position: tuple[int, ...] = ()) -> Fraction:
    if isinstance(raw, float) and not isinstance(raw, str):
        raise reader.error(key, f'give an exact number (a string such as "0.1"), got the float {raw!r}', position)
    return reader.number(raw, key, position).value


def _whole(reader: Reader, raw: object, key: str, low: int, high: int) -> tuple[int, ...]:
    values = raw if isinstance(raw, list) else [raw]
    if not values:
        raise reader.error(key, "expected a whole number or a non-empty list of them")
    out = []
    for i, x in enumerate(values, 1):
        if isinstance(x, bool) or not isinstance(x, int) or not low <= x <= high:
            where = (i,) if isinstance(raw, list) else ()
            raise reader.error(key, f"expected a whole number from {low} to {high}, got {brief(x)}", where)
        out.append(x)
    return tuple(out)


def _rule(reader: Reader, name: str, raw: object) -> Rule:
    key = f"vary.{name}"
    if not isinstance(raw, Mapping):
        raise reader.error(key, f"expected a table such as {{ range = [-1, 1], step = 0.1 }}, got {kind_of(raw)}")
    for k in raw:
        if k not in RULE_KEYS:
            raise reader.error(f"{key}.{k}", "unknown key; expected one of " + ", ".join(RULE_KEYS))
    bounds = raw.get("range")
    if not isinstance(bounds, list) or len(bounds) != 2:
        raise reader.error(f"{key}.range", f"expected [low, high], got {kind_of(bounds)}")
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
        raise reader.error(f"{key}.nonzero", f"expected true or false, got {kind_of(nonzero)}")
    if nonzero and lo == hi == 0:
        raise reader.error(f"{key}.range", "nonzero leaves no value to draw")
    fixed_raw = raw.get("fixed", {})
    if not isinstance(fixed_raw, Mapping):
        raise reader.error(f"{key}.fixed", f'expected a table such as {{ "1,2" = "0.5" }}, got {kind_of(fixed_raw)}')
    fixed = []
    for where, value in fixed_raw.items():
        parts = str(where).split(",")
        if len(parts) != 2 or not all(p.strip().isascii() and p.strip().isdigit() and int(p) >= 1 for p in parts):
            raise reader.error(f"{key}.fixed.{where}", 'expected "row,column", 1-based, such as "1,2"')
        text = value if isinstance(value, str) else None
        if text is None or isinstance(value, bool):
            raise reader.error(f"{key}.fixed.{where}", f"expected a number as a string, got {kind_of(value)}")
        _exact(reader, text, f"{key}.fixed.{where}")
        fixed.append(((int(parts[0]) - 1, int(parts[1]) - 1), str(text).strip()))
    return Rule(lo, int(span), step, decimals, nonzero, tuple(sorted(fixed)))


def _template(data: Mapping[str, Any], source: str) -> Template:
    reader = Reader(source)
    if not isinstance(data, Mapping):
        raise reader.error(None, f"expected a table, got {kind_of(data)}")
    if "vary" not in data:
        raise reader.error("vary", "missing: a template needs a [vary] table that says how numbers are drawn")
    vary = data["vary"]
    if not isinstance(vary, Mapping):
        raise reader.error("vary", f"expected a table, got {kind_of(vary)}")
    for k in vary:
        if k not in VARY_KEYS:
            raise reader.error(f"vary.{k}", "unknown key; expected one of " + ", ".join(VARY_KEYS))
    for k in ("X", "heads", "W_O"):
        if k in data:
            raise reader.error(k, "exercises draw Q, K and V directly; projections and heads are not supported")
    for k in UNSTATED:
        if k in data and not mla_sheet.states(k, data):
            raise reader.error(k, "an exercise sheet does not state this key yet; remove it, or render the derivation")
    ask = data.get("ask", list(DEFAULT_ASK))
    mla_sheet.check_template(reader, data, vary, ask if isinstance(ask, list) else [])
    base = {k: v for k, v in data.items() if k not in TEMPLATE_KEYS}
    rules = tuple((name, _rule(reader, name, vary[name])) for name in MATRICES if name in vary)
    rules += tuple(  # an [mla] table's: redrawn in the table's shapes
        (name, _rule(reader, f"mla.{name}", vary["mla"][name]))
        for name in mla_sheet.matrices(data)
        if name in vary.get("mla", {})
    )
    for name in MATRICES:
        if name not in vary and name not in base and "mla" not in base:
            raise reader.error(f"vary.{name}", f"missing: give {name} in the template or a rule to draw it")
    if "tokens" in vary:
        choose = vary["tokens"]
        lists = choose.get("choose") if isinstance(choose, Mapping) else None
        if not isinstance(lists, list) or not lists or not all(isinstance(x, list) and x for x in lists):
            raise reader.error("vary.tokens", 'expected { choose = [["a", "b"], ...] }')
        if len({len(x) for x in lists}) != 1:
            raise reader.error("vary.tokens.choose", "every list of tokens needs the same length")
        for labels in lists:
            reader.labels(labels, "vary.tokens.choose", len(labels), "Q")
        tokens = tuple(tuple(x) for x in lists)
    elif "tokens" in base:
        tokens = (
            tuple(
                reader.labels(
                    base["tokens"], "tokens", len(base["tokens"]) if isinstance(base["tokens"], list) else 0, "Q"
                )
            ),
        )
    elif "Q" in base:
        tokens = ()
    else:
        raise reader.error("tokens", "missing: the tokens decide how many rows are drawn")
    d_k = _whole(reader, vary.get("d_k", _width(base, "Q", 2)), "vary.d_k", 1, 16)
    d_v = _whole(reader, vary.get("d_v", _width(base, "V", 2)), "vary.d_v", 1, 16)
    if not isinstance(ask, list) or not ask:
        raise reader.error("ask", f"expected a non-empty list of quantities, got {kind_of(ask)}")
    for i, q in enumerate(ask, 1):
        if q not in ASKABLE:
            raise reader.error("ask", f"unknown quantity {brief(q)}; expected one of " + ", ".join(ASKABLE), (i,))
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


__all__ = ["ANSWER_ROWS", "ASKABLE", "DEFAULT_ASK", "Rule", "Template", "load_template"]
