"""compare's reports: the JSON data and the plain text of a Comparison and its verdicts.

Every place is named by the result's own axes with numpy's 0-based indices (issue 28): JSON
``{"batch": 1, "head": 2, "query": 77, "column": 5}``, text ``o[1, 2, 77, 5]``; each report says the
convention once. A result with batch and head axes has a summary per (batch, head), and each verdict
asked for (``--naive``, ``--rtol``/``--atol``, ``--max-ulp``) is given for the whole and for each of them.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

from symattn.input.decimals import round_half_up, significant_exact
from symattn.input.floats import ulp
from symattn.kernel.comparison import EDGES, EXACT_DIGITS, ZERO, Comparison, Entry, figure_text, number_text

WORST = 10  # entries the text report lists


def convention(c: Comparison) -> str:
    """The places' convention, as the JSON says it: ``0-based, as numpy indexes: o[query, column]``."""
    return f"0-based, as numpy indexes: {c.where.convention}"


def order_data(c: Comparison) -> dict[str, str]:
    """Where a cap and a distance bias both act, their order under its keyword's name; else nothing."""
    from symattn import variants

    return {} if c.order is None else {variants.ORDER_KEY: c.order}


def comparison_data(
    c: Comparison, verdict: Any = None, max_ulp: Decimal | None = None, entries: bool = True, keep: bool = False
) -> dict[str, Any]:
    """JSON-ready: every entry (none where not ``entries``: --summary), then the summary and the histogram;
    each (batch, head)'s summary where the result has those axes; the verdict of ``verdict``
    (tolerance.Tolerance) and of ``max_ulp`` if given. ``keep``: without entries, their key stays, null
    (Report.to_json writes them into its place)."""
    places = c.where

    def at(e: Entry | None) -> dict[str, int] | None:
        return None if e is None else places.index(e.row, e.col)

    (worst, n_ulps), (worst_relative, n_relative), (worst_row, n_row) = (c.top(f) for f in FIGURES)
    data: dict[str, Any] = {
        "source": c.source,
        "quantity": c.quantity,
        "format": c.format,
        "places": convention(c),
        **order_data(c),
        "entries": [_entry_data(places.index(e.row, e.col), e) for e in c.entries] if entries else None,
        "not_finite": [{**places.index(i, j), "value": v} for (i, j), v in c.not_finite],
        "summary": {
            "entries": len(c.entries),
            "correctly_rounded": c.correctly_rounded,
            "max_ulps": None if worst is None else _text(worst.ulps),
            "max_ulps_at": at(worst),
            "max_relative": None if worst_relative is None else _text(worst_relative.relative),
            "max_relative_at": at(worst_relative),
            "max_row_relative": None if worst_row is None else _text(worst_row.row_relative),
            "max_row_relative_at": at(worst_row),
            **_ties_data(("max_ulps", n_ulps), ("max_relative", n_relative), ("max_row_relative", n_row)),
            **_zero_data(c, at),
            "histogram": [{"ulps": bucket_label(b), "count": n} for b, n in c.histogram],
        },
    }
    if places.has_heads:
        data["heads"] = _head_data(c, verdict, max_ulp)
    if not entries and not keep:  # made for nothing else: the summary is read from the entries' arrays
        del data["entries"]
    data["decided_at_digits"] = c.digits
    if c.refined is not None:
        data["engine"] = {"path": "float64", "refined": c.refined}
    if max_ulp is not None:  # what exceeded it: how many entries, the largest error and where
        data["max_ulp"] = {
            "bound": str(max_ulp),
            "pass": passes_max_ulp(worst, max_ulp),
            "over": c.entries.over(max_ulp),
            "max_ulps": None if worst is None else _text(worst.ulps),
            "max_ulps_at": at(worst),
        }
    if verdict is not None:
        from symattn.kernel.tolerance import tolerance_data

        data["verdict"] = tolerance_data(verdict, places)
        if verdict.rule == "flash":  # at the top, as kernel tests read it
            data["ratio"] = data["verdict"]["ratio"]
    return data


FIGURES = ("ulps", "relative", "row_relative")


def _ties_data(*counts: tuple[str, int]) -> dict[str, int]:
    # a figure whose largest value several entries may hold: how many (its _at is the first of them)
    return {f"{name}_places": n for name, n in counts if n > 1}


def _text(x: Decimal | None) -> str | None:
    return None if x is None else number_text(x)


def _entry_data(place: dict[str, int], e: Entry) -> dict[str, Any]:
    data: dict[str, Any] = {
        **place,
        "value": None if e.value is None else _float_text(e.value),
        "exact": str(e.exact),
        "ulps": _text(e.ulps),
        "relative": _text(e.relative),
        "row_relative": _text(e.row_relative),
    }
    if e.bucket == ZERO:  # an exact 0 missed: no ULP means anything there, its absolute error does
        data["absolute"] = _text(e.absolute)
    return data


def _zero_data(c: Comparison, at: Any) -> dict[str, Any]:
    """The exact zeros the result misses: how many, and the largest absolute error among them."""
    missed = c.entries.zeros_missed()
    if not missed:
        return {}
    top = max(missed, key=lambda e: e.absolute or 0)  # the first of the largest
    return {
        "zeros_missed": len(missed),
        "max_zero_error": _text(top.absolute),
        "max_zero_error_at": at(top),
    }


def passes_max_ulp(worst: Entry | None, bound: Decimal) -> bool:
    """--max-ulp: no ULP figure (three digits, as shown) over the bound."""
    return worst is None or worst.ulps is None or worst.ulps <= bound


def _head_data(c: Comparison, verdict: Any, max_ulp: Decimal | None) -> list[dict[str, Any]]:
    from symattn.kernel.perhead import summaries
    from symattn.kernel.tolerance import tolerance_data

    places = c.where
    verdicts = {} if verdict is None else dict(verdict.heads)

    def at(e: Entry | None) -> dict[str, int] | None:
        return None if e is None else places.index(e.row, e.col)

    out = []
    for s in summaries(c):
        data: dict[str, Any] = {
            places.unit: s["batch"],  # varlen: its sequence
            "head": s["head"],
            "entries": s["entries"],
            "correctly_rounded": s["correctly_rounded"],
            "max_ulps": None if s["worst"] is None else number_text(s["worst"].ulps),
            "max_ulps_at": at(s["worst"]),
            "max_relative": None if s["worst_relative"] is None else number_text(s["worst_relative"].relative),
            "max_relative_at": at(s["worst_relative"]),
            **_ties_data(("max_ulps", s["worst_places"]), ("max_relative", s["worst_relative_places"])),
        }
        if max_ulp is not None:
            data["max_ulp_pass"] = passes_max_ulp(s["worst"], max_ulp)
        if (s["batch"], s["head"]) in verdicts:
            data["verdict"] = tolerance_data(verdicts[(s["batch"], s["head"])], places)
        out.append(data)
    return out


def render_comparison(
    c: Comparison,
    lang: str = "en",
    every: bool = False,
    worst: int = WORST,
    tolerance: Any = None,
    max_ulp: Decimal | None = None,
) -> str:
    """The comparison as plain text: summary, the verdicts of ``tolerance`` (tolerance.Tolerance) and
    ``max_ulp``, each (batch, head), the histogram, then the worst entries (or every entry)."""
    from symattn.kernel.tolerance import fraction_text
    from symattn.rendering.environment import render_template

    total = max(1, len(c.entries))
    # not finite: each listed with every entry, else the first ``worst`` (an output of NaN listed 16,384 twice)
    not_finite = c.not_finite if every else c.not_finite[:worst]
    shown = list(c.entries) if every else c.entries.not_finite()[:worst] + c.ranked(worst)
    tops = [c.top(f) for f in FIGURES]
    places = c.where
    least = ulp(Fraction(0), c.format)  # the format's least subnormal: below it the best float is 0 or it
    below = [e for e in shown if e.exact != 0 and abs(e.exact) < least]
    marked = {id(e) for e in below}
    exact = {id(e): f"{e.exact}*" if id(e) in marked else str(e.exact) for e in shown}
    num = figure_text
    figures = [[num(x) for x in (e.ulps, e.relative) if x is not None] for e in shown]
    # a bar of up to 40 marks per bucket, at least one for a bucket that has an entry
    histogram = [(b, n, max(1, (n * 40 + total - 1) // total)) for b, n in c.histogram]
    missed = c.entries.zeros_missed()
    return render_template(
        "compare",
        "text",
        lang,
        c=c,
        not_finite=not_finite,
        not_finite_more=len(c.not_finite) - len(not_finite),
        convention=places.convention,
        shown=shown,
        widths=(  # a column widens only where a text leaves no space in it
            max([10] + [len(places.text(e.row, e.col)) + 2 for e in shown]),
            _width(24, exact.values()),
            _width(24, ["—" if e.value is None else _float_text(e.value) for e in shown]),
            *(_width(10, [x for f in figures for x in f]),) * 2,
        ),
        exact_text=lambda e: exact[id(e)],
        least=None if not below else {"power": least.denominator.bit_length() - 1, "about": _about(least)},
        all_shown=every,
        histogram=histogram,
        percent=None if c.refined is None else _percent(c.refined, total),
        worst=tops[0][0],
        worst_relative=tops[1][0],
        worst_row=tops[2][0],
        ties=[n for _, n in tops],  # how many places may hold each largest figure
        missed=missed,
        worst_zero=max(missed, key=lambda e: e.absolute or 0) if missed else None,
        max_ulp=None if max_ulp is None else str(max_ulp),  # as typed
        max_ulp_pass=None if max_ulp is None else passes_max_ulp(tops[0][0], max_ulp),
        max_ulp_over=None if max_ulp is None else c.entries.over(max_ulp),
        tol=tolerance,
        tol_text=fraction_text,
        label=bucket_label,
        zero=ZERO,
        num=num,
        value=lambda e: "—" if e.value is None else _float_text(e.value),
        heads=None if not places.has_heads else _head_lines(c, tolerance, max_ulp, num),
        place=lambda e: places.text(e.row, e.col),
        place_at=lambda ij: places.text(*ij),
        unit=places.unit,
        out=places.measured,
    )


def _head_lines(c: Comparison, tolerance: Any, max_ulp: Decimal | None, num: Any) -> list[dict[str, Any]]:
    """Each (batch, head)'s figures and verdicts as the text report shows them."""
    from symattn.kernel.perhead import summaries

    places = c.where
    verdicts = {} if tolerance is None else dict(tolerance.heads)
    out = []
    for s in summaries(c):
        w = s["worst"]
        out.append(
            {
                **s,
                "max_ulps": "—" if w is None else num(w.ulps),
                "at": "—" if w is None else places.text(w.row, w.col),
                "at_places": s["worst_places"],
                "max_relative": "—" if s["worst_relative"] is None else num(s["worst_relative"].relative),
                "max_ulp_pass": None if max_ulp is None else passes_max_ulp(w, max_ulp),
                "verdict": verdicts.get((s["batch"], s["head"])),
            }
        )
    return out


def _percent(part: int, total: int) -> str:
    # the share to three decimals, rounded half-up from the exact fraction
    return format(round_half_up(Fraction(100 * part, total), 3), "f")


def _width(least: int, texts: Any) -> int:
    # a column's width in terminal columns: ``least``, or where a text fills it, the longest text and two spaces
    from symattn.rendering.environment import terminal_width  # as pad measures it: a CJK character takes two

    longest = max(map(terminal_width, texts), default=0)
    return least if longest < least else longest + 2


def _about(x: Fraction) -> str:
    # a positive x to two significant digits, as the text shows an exact value: 1.4E-45
    return str(significant_exact(x, 2))


def _float_text(x: Fraction) -> str:
    # the float to EXACT_DIGITS significant digits, correctly rounded from its exact value
    return str(significant_exact(x, EXACT_DIGITS))


def bucket_label(b: int) -> str:
    if b == 0:
        return "0"
    if b == ZERO:
        return "exact 0 missed"
    if b == len(EDGES):
        return f"> {_edge(EDGES[-1])}"
    return f"({_edge(EDGES[b - 1])}, {_edge(EDGES[b])}]"


def _edge(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else format(round_half_up(x, 1), "f")


__all__ = ["WORST", "bucket_label", "comparison_data", "convention", "passes_max_ulp", "render_comparison"]
