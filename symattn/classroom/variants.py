"""One student's variant of an exercise template, drawn so that it suits hand work.

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

The template itself is read by :mod:`symattn.classroom.template`.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import symattn.classroom.mla_sheet as mla_sheet
from symattn.classroom.template import Rule, Template, load_template
from symattn.exact.head_figures import exact_figures, hand_figures
from symattn.exact.heads import build_model
from symattn.exact.model import Model
from symattn.input.decimals import round_half_up
from symattn.input.errors import EvaluationError, SpecError
from symattn.input.formula import Formula
from symattn.input.numeral import Numeral
from symattn.input.records import record
from symattn.input.spec import Spec, spec_from_mapping

CONDITIONS = ("zero-row", "tie", "gap", "hand-digits", "boundary")
BOUNDARY = Fraction(1, 10**9)


@record
class Asked:
    """One asked number: its claims key (1-based, as in answers.toml) and where it stands (0-based)."""

    key: str
    quantity: str
    row: int | None
    col: int | None


@record
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


def worked_rows(asked: Sequence[Asked]) -> set[int]:
    """The rows a student works out (the latent is asked of every key, whatever the rows asked)."""
    return {a.row for a in asked if a.row is not None and a.quantity != "latent"}


def variant_seed(class_seed: int | str, student_id: str) -> int:
    """The documented per-student seed: the first 8 bytes of SHA-256 of ``"<class_seed>:<student_id>"``."""
    return int.from_bytes(hashlib.sha256(f"{class_seed}:{student_id}".encode()).digest()[:8], "big")


def _number(rule: Rule, rng: random.Random) -> str:
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
    if "mla" in data:
        mla_sheet.draw_into(data, [(k, r) for k, r in t.rules if k in mla_sheet.STATED], lambda r: _number(r, rng))
    for name, rule in t.rules:
        if name in mla_sheet.STATED:
            continue
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
        if q in mla_sheet.QUANTITIES:
            cols = mla_sheet.asked_cols(spec, q)
        # the latent of every key: each score needs it
        for i in range(len(spec.K)) if q == "latent" else rows:
            for j in cols:
                key = f"{q}[{i + 1}]" + ("" if j is None else f"[{j + 1}]")
                out.append(Asked(key, q, i, j))
    return tuple(out)


def failed(spec: Spec, t: Template) -> str | None:
    """The first hand-work condition the draw breaks, or None."""
    for m in (spec.Q, spec.K, spec.V):
        # (a formula is never drawn; a template's fixed one is refused by build_model below)
        if any(all(isinstance(x, Numeral) and x.value == 0 for x in row) for row in m):
            return "zero-row"
    model = build_model(spec)
    # the softmax's own inputs decide: with a part that changes the scores or z those are not the plain scores
    if any(len(next(g for g in groups if model.row_max[i] in g)) > 1 for i, groups in enumerate(model._groups)):
        return "tie"
    try:
        exact = exact_figures(model, spec.decimals, stable=spec.softmax == "stable", notation=spec.notation)
        hand = hand_figures(model, spec)
    except (SpecError, EvaluationError):
        return "hand-digits"
    for weights in exact.weights:
        shown = [w.value for w in weights]
        if shown.count(max(shown)) > 1:
            return "tie"
    focus = sorted(Fraction(w.value) for w in exact.weights[spec.focus])
    if any(b - a < t.min_gap for a, b in zip(focus, focus[1:])):
        return "gap"
    if not _same_digits(exact, hand, t.ask, _rows(spec, t.answer_rows)):
        return "hand-digits"
    if _near_boundary(model, spec, exact):
        return "boundary"
    if "latent_output" in t.ask and not mla_sheet.hand_agrees(spec, model, hand.weights, _rows(spec, t.answer_rows)):
        return "hand-digits"
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
    for quantity in (q for q in ask if q not in mla_sheet.QUANTITIES):  # (MLA's: mla_sheet.hand_agrees)
        for e, h in zip(_entries(exact, quantity, rows), _entries(hand, quantity, rows)):
            if e.scientific or h.scientific or e.is_infinite or h.is_infinite:
                if format(e.value, "f") != format(h.value, "f"):
                    return False
                continue
            if e.exact and Fraction(h.value) == Fraction(e.value):
                continue  # one exact value, whatever zeros each shows (a turned score: 1.250 and 1.25)
            places = max(0, -e.value.as_tuple().exponent)
            if round_half_up(Fraction(h.value), places) != e.value or -h.value.as_tuple().exponent < places:
                return False
    return True


def _near_boundary(model: Model, spec: Spec, exact) -> bool:
    d = spec.decimals
    shown = {
        "sqrt_dk": ((exact.sqrt_dk,),),
        "scaled": exact.scaled,
        "exp": exact.exp,
        "exp_sum": tuple((x,) for x in exact.exp_sum),
        "weights": exact.weights,
        "output": exact.output,
    }
    places = {
        "sqrt_dk": d.sqrt_dk,
        "scaled": d.scaled,
        "exp": d.exp,
        "exp_sum": d.exp,
        "weights": d.weights,
        "output": d.output,
    }
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
                            near = (
                                model.compare(quantity, i, j, bound - BOUNDARY) > 0
                                and model.compare(quantity, i, j, bound + BOUNDARY) < 0
                            )
                    except EvaluationError:
                        near = True
                    if near:
                        return True
    return False


def draw(
    template: str | Path | Mapping[str, Any] | Template, seed: int, student_id: str = "", name: str = ""
) -> Variant:
    """One variant from a variant seed: redrawn until every hand-work condition holds."""
    t = load_template(template)
    rng = random.Random(seed)
    failures = {c: 0 for c in CONDITIONS}
    for attempt in range(1, t.tries + 1):
        data = _draw(t, rng)
        spec = spec_from_mapping(data, t.source)
        if spec.is_symbolic:  # a fixed matrix of the template holds symbols: nothing to work by hand
            key = next(
                k for k in ("Q", "K", "V") if any(isinstance(x, Formula) for row in getattr(spec, k) for x in row)
            )
            raise SpecError(t.source, key, f"exercises need numbers, not symbols ({', '.join(spec.symbols)})")
        if attempt == 1:
            mla_sheet.check_turn(spec)  # a turn the sheet cannot state is the template's, not the draw's
        problem = failed(spec, t)
        if problem is None:
            return Variant(
                student_id, name, seed, tuple(data.items()), spec, asked(spec, t.ask, t.answer_rows), attempt
            )
        failures[problem] += 1
    worst = max(CONDITIONS, key=lambda c: failures[c])
    raise SpecError(
        t.source,
        "vary",
        f"no draw suits hand work after {t.tries} tries; most failed: {worst} "
        f"({failures[worst]} times); widen the ranges or change the step",
    )


__all__ = ["Asked", "CONDITIONS", "Variant", "asked", "draw", "failed", "variant_seed", "worked_rows"]
