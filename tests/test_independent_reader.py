"""An independent reader of the rendered Markdown: every shown equation is read back and recomputed here,
from the numbers shown, with Python's ``fractions`` (and mpmath for e^z), never with symattn's code.

Golden files only compare symattn with its own earlier output; this test is an oracle from outside. It
reads every expanded line of a page (``0.9×1.0 + 0.1×0.2 = 0.92``, the exps and their sum, the softmax
fractions, the weighted sums, the output projection, the gradients' sums) and checks that

- each term pairs the right entries of the matrices shown before it (the row of Q and column of Kᵀ its
  name claims, the weights of its own row, …);
- by hand, each result is its shown terms' value, exactly (=) or rounded half-up at its last digit (≈);
- in exact rounding, each result, and each matrix shown, is the correct rounding of the exact value, which
  :mod:`page_exact` computes from the spec's own text;
- by hand, each matrix that follows from shown numbers (S = QKᵀ, S/√d_k, the Jacobians, dS, dW, dX, …)
  is what those numbers give, and each percent is its weight × 100.

The grid runs over sizes, cross attention, a causal mask with the stable softmax, projections, two and
four heads with W_O, and the backward pass, in both languages and both rounding modes, with ``expand =
"all"`` and the default.
"""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from functools import cache

import mpmath
import pytest

from symattn.cli.commands import main

from . import page_exact, page_reader


def rows(r, c, k, decimals=1):
    return [[f"{((i * 7 + j * k) % 19 - 9) / 10**decimals:.{decimals}f}" for j in range(c)] for i in range(r)]


TOKENS = {
    "en": ["the", "cat", "sat", "on", "a", "mat", "all", "day"],
    "zh": ["小猫", "吃", "鱼", "它", "在", "家", "睡", "觉"],
}


def grid_spec(kind: str, lang: str) -> dict:
    t = TOKENS[lang]
    if kind.startswith("plain"):
        n, d = map(int, kind[5:].split("x"))
        spec = {"tokens": t[:n], "Q": rows(n, d, 3), "K": rows(n, d, 5), "V": rows(n, d, 2)}
    elif kind == "seed":
        spec = {"tokens": t[:3], "Q": [[1.0, 0.0], [0.0, 1.0], [0.9, 0.1]], "K": [[1.0, 0.2], [0.1, 1.0], [0.8, 0.3]]}
        spec["V"] = [[10, 0], [0, 10], [1, 1]]
    elif kind == "cross":
        spec = {"tokens": t[:3], "key_tokens": [x + "'" for x in t[:4]], "Q": rows(3, 3, 3), "K": rows(4, 3, 5)}
        spec["V"] = rows(4, 2, 2)
    elif kind == "causal":
        spec = {"tokens": t[:4], "Q": rows(4, 3, 3), "K": rows(4, 3, 5), "V": rows(4, 3, 2), "mask": "causal"}
        spec["softmax"] = "stable"
    elif kind == "projection":
        spec = {"tokens": t[:4], "X": rows(4, 3, 3), "W_Q": rows(3, 2, 5), "W_K": rows(3, 2, 2), "W_V": rows(3, 2, 4)}
        spec["b_Q"] = ["0.1", "-0.2"]
    elif kind.startswith("heads"):
        spec = {"tokens": t[:4], "X": rows(4, 4, 3), "W_Q": rows(4, 4, 5), "W_K": rows(4, 4, 2), "W_V": rows(4, 4, 4)}
        spec |= {"heads": int(kind[5:]), "W_O": rows(4, 4, 6), "b_O": ["0.1", "0", "0", "-0.1"]}
    else:
        raise ValueError(kind)
    return spec | {"lang": lang}


@cache
def page(kind: str, lang: str, rounding: str, expand: str, backward: bool, tmp: str) -> str:
    """The Markdown that ``symattn render`` writes for one spec of the grid (the command line as a user runs it)."""
    path = f"{tmp}/{kind}.{lang}.json"
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(grid_spec(kind, lang), fh, ensure_ascii=False)
    target = f"{tmp}/{kind}.{lang}.{rounding}.{expand}.{backward}.md"
    argv = ["render", path, "--rounding", rounding, "--expand", expand, "-o", target]
    assert main(argv + (["--backward"] if backward else [])) == 0
    with open(target, encoding="utf-8") as fh:
        return fh.read()


# --- rounding, decided by the reader ------------------------------------------------------------------


def _unit(shown: Decimal) -> Fraction:
    return Fraction(10) ** shown.as_tuple().exponent


def by_hand(value: Fraction, shown: Decimal, rel: str) -> bool:
    """``shown`` is ``value`` (=), or ``value`` rounded half-up (away from zero) at its last digit (≈)."""
    if rel in ("=", "=v"):
        return value == Fraction(shown)
    unit = _unit(shown)
    q = abs(value) / unit
    n = (q.numerator * 2 + q.denominator) // (q.denominator * 2)
    return (n if value >= 0 else -n) * unit == Fraction(shown)


def correctly_rounded(value, shown: Decimal, rel: str) -> bool:
    """The same for an exact value known to 60 digits (a tie within 10^-40 counts as a tie)."""
    if value is None or shown is None:
        return value is None and shown is None  # −∞
    unit = mpmath.mpf(_unit(shown).numerator) / _unit(shown).denominator
    q = abs(value) / unit
    floor = mpmath.floor(q)
    n = floor + 1 if q - floor > mpmath.mpf("0.5") - mpmath.mpf(10) ** -40 else floor
    rounded = (n if value >= 0 else -n) * unit
    on_grid = abs(value - mpmath.mpf(str(shown))) < mpmath.mpf(10) ** -40
    # = claims the whole value; ≈ that it is rounded; ≈v is a vector's ≈, which may hold exact entries
    relation = {"=": on_grid, "≈": not on_grid, "=v": on_grid, "≈v": True}[rel]
    return abs(rounded - mpmath.mpf(str(shown))) < unit / 4 and relation


def _f(x: Decimal | None) -> Fraction:
    return Fraction(x)


def hand_value(line: page_reader.Line):
    """What a line's shown terms give, exactly (e^z to 60 digits)."""
    if line.form == "products":
        pairs, bias = line.value
        return sum((_f(a) * _f(b) for a, b in pairs), Fraction(0)) + (_f(bias) if bias is not None else 0)
    if line.form == "sum":
        return sum((_f(x) for x in line.value), Fraction(0))
    if line.form == "ratio":
        return _f(line.value[0]) / _f(line.value[1])
    if line.form == "compact":
        alpha, dA, r = map(_f, line.value)
        return alpha * (dA - r)
    if line.form == "shift":
        z, m = line.value
        return None if z is None else _f(z) - _f(m)
    if line.form == "exp":
        return None if line.value is None else mpmath.exp(mpmath.mpf(str(line.value)))
    raise AssertionError(line.form)


# --- the checks ---------------------------------------------------------------------------------------


def _key(line: page_reader.Line) -> tuple:
    quantity = {"JdA": "dZ"}.get(line.quantity, line.quantity)
    return (quantity, *line.where, 0) if quantity in ("sum", "r") else (quantity, *line.where)  # a column


def check_lines(p: page_reader.Page, rounding: str, exact: dict) -> list[str]:
    problems = []
    for line in p.lines:
        said = f"{line.quantity}{line.where} {line.value} {line.rel} {line.result}"
        if line.expected is not None and line.form in ("products", "ratio", "compact", "exp"):
            if line.value != line.expected:
                problems.append(f"paired with the wrong entries: {said}, expected {line.expected}")
        if rounding == "hand":
            value = hand_value(line)
            if value is None:
                ok = line.result is None or line.result == 0
            elif isinstance(value, Fraction):
                ok = by_hand(value, line.result, line.rel)
            else:
                ok = correctly_rounded(value, line.result, line.rel)
            if not ok:
                problems.append(f"does not follow from its shown terms: {said}")
        else:
            if not correctly_rounded(exact[_key(line)], line.result, line.rel):
                problems.append(f"not the exact value rounded ({exact[_key(line)]}): {said}")
            terms = hand_value(line)
            if line.lead == "=" and abs(mpmath.mpf(terms.numerator) / terms.denominator - exact[_key(line)]) > 1e-40:
                problems.append(f"= in front of terms that are not the exact value: {said}")
    return problems


INPUTS = {"X": "X", "X_kv": "X_kv", "W_Q": "W_Q", "W_K": "W_K", "W_V": "W_V", "W_O": "W_O"}


def _exact_matrix(shown: page_reader.Shown, exact: dict):
    head = shown.where[0]
    if shown.name == "J":
        return exact[(f"J:{shown.where[1]}", head)]
    if shown.name == "agree":  # J dA = α ⊙ (dA − r): the row of dZ
        return [exact[("dZ", head)][shown.where[1]]]
    return exact.get((shown.name, head))


def check_matrices(p: page_reader.Page, spec: dict, exact: dict) -> list[str]:
    """In exact rounding, each matrix shown is the exact one rounded (= only where every entry is exact);
    the inputs are the spec's, exactly."""
    problems = []
    for shown in p.matrices:
        if shown.name in INPUTS:
            if [[Fraction(x) for x in row] for row in shown.rows] != [
                [Fraction(str(x)) for x in row] for row in spec[INPUTS[shown.name]]
            ]:
                problems.append(f"{shown.name} is not the spec's")
            continue
        values = _exact_matrix(shown, exact)
        if values is None:
            continue
        flat = [(v, s) for vrow, srow in zip(values, shown.rows) for v, s in zip(vrow, srow)]
        assert len(flat) == sum(len(r) for r in shown.rows), shown.name
        on_grid = [_on(v, s) for v, s in flat]
        rel_ok = all(on_grid) if shown.rel == "=" else not all(on_grid)
        wrong = [(v, s) for v, s in flat if not correctly_rounded(v, s, "=" if _on(v, s) else "≈")]
        if wrong or not rel_ok:
            problems.append(f"{shown.name}{shown.where} {shown.rel}: {wrong[:3]} (relation {rel_ok})")
    return problems


def _on(v, s) -> bool:
    return v is None or (s is not None and abs(v - mpmath.mpf(str(s))) < mpmath.mpf(10) ** -40)


def check_percents(p: page_reader.Page) -> list[str]:
    return [f"{shown} % of {weights}" for shown, weights in p.percents if shown != [w.scaleb(2) for w in weights]]


def _rows_of(shown: page_reader.Shown):
    return [[None if x is None else Fraction(x) for x in row] for row in shown.rows]


def _mul(A, B):
    return [[sum((a * b for a, b in zip(row, col)), Fraction(0)) for col in zip(*B)] for row in A]


def _T(A):
    return [list(col) for col in zip(*A)]


def _plus(A, B):
    return [[a + b for a, b in zip(x, y)] for x, y in zip(A, B)]


def _side_by_side(blocks):
    return [sum(parts, []) for parts in zip(*blocks)]


def check_hand_matrices(p: page_reader.Page, spec: dict) -> list[str]:
    """By hand, each matrix that follows from numbers shown before it is what those numbers give."""
    problems, seen = [], {}
    alpha: dict[tuple, list] = {}
    for line in p.lines:
        if line.quantity == "A":
            alpha.setdefault(line.where[:2], []).append(Fraction(line.result))
    sqrt = Fraction(p.sqrt) if p.sqrt is not None else None
    heads = spec.get("heads", 1)

    def every(name):  # a gradient of every head, side by side
        return _side_by_side([seen[(name, h)] for h in range(1, heads + 1)]) if heads > 1 else seen[(name, 0)]

    def expected(shown):
        name, head = shown.name, shown.where[0]
        have = lambda *names: all((n, 0) in seen or (n, head) in seen for n in names)  # noqa: E731
        if name == "Z" and sqrt and (("S", head) in seen):
            return [[s / sqrt for s in row] for row in seen[("S", head)]]
        if name == "Zm" and ("Z", head) in seen:
            return [
                [z if g is not None else None for z, g in zip(zr, gr)]
                for zr, gr in zip(seen[("Z", head)], _rows_of(shown))
            ]
        if name == "J":
            a = alpha[(head, shown.where[1])]
            return [[a[j] * ((1 if j == k else 0) - a[k]) for k in range(len(a))] for j in range(len(a))]
        if name == "dS" and sqrt and ("dZ", head) in seen:
            return [[z / sqrt for z in row] for row in seen[("dZ", head)]]
        if name == "C":
            return _side_by_side([seen[("O", h)] for h in range(1, heads + 1)])
        if name == "OUT" and have("C", "W_O"):
            out = _mul(seen[("C", 0)], seen[("W_O", 0)])
            return _plus(out, [seen[("b_O", 0)][0]] * len(out)) if ("b_O", 0) in seen else out
        if name == "dW_O":
            return _mul(_T(seen[("C", 0)]), seen[("dO", 0)])
        if name == "db_O":
            return [[sum(col, Fraction(0)) for col in zip(*seen[("dO", 0)])]]
        if name == "dC":
            return _mul(seen[("dO", 0)], _T(seen[("W_O", 0)]))
        if name in ("dW_Q", "dW_K", "dW_V", "db_Q", "db_K", "db_V"):
            grad = every("d" + name[-1])
            if name.startswith("db"):
                return [[sum(col, Fraction(0)) for col in zip(*grad)]]
            X = seen[("X_kv" if name[-1] != "Q" and ("X_kv", 0) in seen else "X", 0)]
            return _mul(_T(X), grad)
        if name in ("dX", "dX_kv"):
            W = {n: seen[("W_" + n, 0)] for n in "QKV"}
            through = {n: _mul(every("d" + n), _T(W[n])) for n in "QKV"}
            kv = _plus(through["K"], through["V"])
            if name == "dX_kv":
                return kv
            return through["Q"] if ("X_kv", 0) in seen else _plus(through["Q"], kv)
        return None

    for shown in p.matrices:
        want = expected(shown)
        got = _rows_of(shown)
        seen[(shown.name, shown.where[0])] = got
        if want is None:
            continue
        for wrow, grow, srow in zip(want, got, shown.rows):
            for w, g, s in zip(wrow, grow, srow):
                if (w is None) != (g is None) or (w is not None and not by_hand(w, s, shown.rel)):
                    problems.append(f"{shown.name}{shown.where} {shown.rel}: shows {s}, the shown numbers give {w}")
    return problems


LINES_OF = {"S": "S", "A": "A", "O": "O", "OUT": "OUT", "Q": "Q", "K": "K", "V": "V", "dV": "dV", "dA": "dA"}
LINES_OF |= {"dQ": "dQ", "dK": "dK", "dZ": "dZ"}


def check_matrices_match_lines(p: page_reader.Page) -> list[str]:
    """Each full matrix shows the numbers its expanded lines worked out."""
    results = {(line.quantity, *line.where): line.result for line in p.lines}
    problems = []
    for shown in p.matrices:
        quantity = LINES_OF.get(shown.name)
        rows = [(shown.where[1], shown.rows[0])] if shown.name == "agree" else enumerate(shown.rows)
        if shown.name == "agree":
            quantity = "dZ"
        if quantity is None:
            continue
        for i, row in rows:
            for j, x in enumerate(row):
                key = (quantity, shown.where[0], i, j)
                if key in results and results[key] != x:
                    problems.append(f"{shown.name}{shown.where}[{i}][{j}] shows {x}, its line {results[key]}")
    return problems


# --- the grid -----------------------------------------------------------------------------------------

FAST = [("seed", False), ("plain2x2", True), ("plain4x3", False), ("cross", False), ("causal", False)]
FAST += [("projection", True), ("heads2", False)]
# the backward pass costs most: its big cases are read with every entry expanded only
SLOW = [("plain8x8", False, "focus"), ("plain8x8", False, "all"), ("plain6x4", True, "all"), ("cross", True, "all")]
SLOW += [("causal", True, "all"), ("heads2", True, "all"), ("heads4", True, "all")]


def read_and_check(tmp_path_factory, kind, backward, lang, rounding, expand):
    tmp = str(tmp_path_factory.getbasetemp())
    spec = grid_spec(kind, lang)
    markdown = page(kind, lang, rounding, expand, backward, tmp)
    p = page_reader.read(markdown, spec["tokens"], spec.get("key_tokens") or spec["tokens"])
    n, m, heads = len(spec["tokens"]), len(spec.get("key_tokens") or spec["tokens"]), spec.get("heads", 1)
    scores = [line for line in p.lines if line.quantity == "S"]
    assert len(scores) == (n if expand == "all" else 1) * m * heads  # every dot product was read
    assert sum(line.quantity == "A" for line in p.lines) == len(scores)
    if backward:
        assert sum(line.quantity == "JdA" for line in p.lines) == len(scores)
    exact = page_exact.exact(spec) if rounding == "exact" else {}
    problems = check_lines(p, rounding, exact) + check_percents(p) + check_matrices_match_lines(p)
    problems += check_matrices(p, spec, exact) if rounding == "exact" else check_hand_matrices(p, spec)
    assert problems == [], f"{len(problems)} problems, the first:\n" + "\n".join(problems[:12])


@pytest.mark.parametrize("expand", ["focus", "all"])
@pytest.mark.parametrize("rounding", ["exact", "hand"])
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("kind, backward", FAST)
def test_every_shown_equation_recomputes(tmp_path_factory, kind, backward, lang, rounding, expand):
    read_and_check(tmp_path_factory, kind, backward, lang, rounding, expand)


@pytest.mark.slow
@pytest.mark.parametrize("rounding", ["exact", "hand"])
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("kind, backward, expand", SLOW)
def test_every_shown_equation_recomputes_in_the_big_grid(tmp_path_factory, kind, backward, lang, rounding, expand):
    read_and_check(tmp_path_factory, kind, backward, lang, rounding, expand)


def test_the_reader_catches_a_wrong_pairing_and_a_wrong_sum(tmp_path):
    # the reader is only worth its checks: a page with swapped terms and a sum off by one digit fails them
    spec = grid_spec("seed", "en")
    markdown = page("seed", "en", "hand", "all", False, str(tmp_path))
    good = page_reader.read(markdown, spec["tokens"], spec["tokens"])
    assert check_lines(good, "hand", {}) == []
    swapped = markdown.replace(r"0.9\times 1.0 + 0.1\times 0.2 = 0.92", r"0.9\times 0.2 + 0.1\times 1.0 = 0.92")
    off = markdown.replace(r"0.9\times 1.0 + 0.1\times 0.2 = 0.92", r"0.9\times 1.0 + 0.1\times 0.2 = 0.93")
    for bad, problem in ((swapped, "paired with the wrong entries"), (off, "does not follow from its shown terms")):
        assert bad != markdown
        problems = check_lines(page_reader.read(bad, spec["tokens"], spec["tokens"]), "hand", {})
        assert [p.split(":")[0] for p in problems if p.startswith(problem)] == [problem]


def test_the_reader_catches_an_equals_sign_in_front_of_rounded_terms(tmp_path):
    # the slip this reader found: dZ "=" the products of the rounded Jacobian, where only ≈ holds
    spec = grid_spec("plain2x2", "en")
    markdown = page("plain2x2", "en", "exact", "all", True, str(tmp_path))
    line = r"dZ_{\text{the},\text{the}} &\approx 0.218\times"
    assert line in markdown
    bad = page_reader.read(markdown.replace(line, line.replace("&\\approx", "&=")), spec["tokens"], spec["tokens"])
    problems = check_lines(bad, "exact", page_exact.exact(spec))
    assert [p.split(":")[0] for p in problems] == ["= in front of terms that are not the exact value"]
