"""compare's answer as one object: the comparison, the verdicts asked for, and both reports (JSON and text).

``symattn compare`` and ``symattn.kernel.compare`` both make a :class:`Report` and show it: the CLI
prints ``to_json()`` or ``text()`` and exits 1 where ``ok`` is false, the API returns it, and
``symattn.testing.assert_attention_close`` raises where ``ok`` is false. Several runs of one kernel
(``symattn compare SPEC r1.npy r2.npy …``, or a list of tensors) make a report of reports and their
bitwise spread (``spread.py``).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from symattn.input.floats import FloatResult
from symattn.input.records import record
from symattn.kernel.comparison import Comparison, figure_text
from symattn.kernel.comparison_report import (
    WORST,
    comparison_data,
    convention,
    order_data,
    passes_max_ulp,
    render_comparison,
)
from symattn.kernel.spread import Spread
from symattn.kernel.tolerance import Tolerance, fraction_text, verdict

RULES = ("allclose", "flash", "ulp")


@record
class Report:
    """One result against the exact values, with the verdicts asked for; or, with ``runs``, several results of
    one kernel (each its own Report) and their bitwise ``spread``."""

    comparison: Comparison  # of the first run where there are several
    verdict: Tolerance | None = None  # FlashAttention's or torch.allclose's rule, for the whole and each head
    max_ulp: Decimal | None = None  # the --max-ulp bound, if one was asked for
    shape: tuple[int, ...] = ()  # the result's, as given
    listed: int | None = WORST  # the largest errors the text lists; None: every entry
    runs: tuple[Report, ...] = ()
    spread: Spread | None = None

    @property
    def ok(self) -> bool:
        """No verdict failed, no error past ``max_ulp``, no NaN or infinity (in every run)."""
        if self.runs:
            return all(r.ok for r in self.runs)
        over = self.max_ulp is not None and not passes_max_ulp(self.comparison.worst, self.max_ulp)
        failed = self.verdict is not None and not self.verdict.passed
        return not (over or failed or self.comparison.not_finite)

    @property
    def spread_at(self) -> dict[str, int] | None:
        """Where several runs lie farthest apart, 0-based in the result's own axes ({"batch": 1, "head": 3,
        "query": 40, "column": 7}), as JSON's ``ulps_apart_at``; None for one run or no entry apart."""
        if self.spread is None or self.spread.cell is None:
            return None
        return self.comparison.where.index(*self.spread.cell)

    @property
    def rule(self) -> str | None:
        """The rule that decides ``ok``: "flash", "allclose", "ulp" (``max_ulp`` alone), or None (no verdict)."""
        if self.verdict is not None:
            return self.verdict.rule
        return "ulp" if self.max_ulp is not None else None

    @property
    def worst_at(self) -> tuple[int, int] | None:
        """The rule's worst entry, in the comparison's lined-up matrix: the verdict's, else the largest ULP error."""
        if self.verdict is not None and self.verdict.worst is not None:
            return self.verdict.worst
        worst = self.comparison.worst
        return None if worst is None else (worst.row, worst.col)

    @property
    def worst_place(self) -> str | None:
        """The rule's worst entry as the result's own place: ``out[1, 2, 77, 5]``."""
        at = self.worst_at
        return None if at is None else self.comparison.where.text(*at)

    def figure(self) -> str:
        """The rule's figure, as the reports show it: ``ratio 0.427``, ``share 0.0312``, ``12.3 ULP``."""
        v = self.verdict
        if v is not None and v.not_finite:
            return "not finite"
        if v is not None and v.rule == "flash":
            return "ratio undefined" if v.ratio is None else f"ratio {figure_text(v.ratio)}"
        if v is not None:
            return "share ∞" if v.share is None else f"share {figure_text(v.share)}"
        worst = self.comparison.worst
        return "—" if worst is None or worst.ulps is None else f"{figure_text(worst.ulps)} ULP"

    def rule_text(self) -> str:
        """The rule with its tolerances: ``allclose(rtol=0.016, atol=1e-5)``, ``flash(rtol=2, atol=0)``,
        ``ulp(max_ulp=4)``, or ``none``."""
        v = self.verdict
        if v is not None:
            return f"{v.rule}(rtol={fraction_text(v.rtol)}, atol={fraction_text(v.atol)})"
        return "none" if self.max_ulp is None else f"ulp(max_ulp={self.max_ulp})"

    def data(self, summary: bool = False) -> dict[str, Any]:
        """The JSON of ``symattn compare --format json`` (``summary``: without the list of every entry)."""
        if self.runs:
            return self._runs_data()
        return comparison_data(self.comparison.whole(), self.verdict, self.max_ulp, entries=not summary)

    def to_json(self, summary: bool = False) -> str:
        """``data()`` as ``symattn compare --format json`` prints it, byte for byte: the list of every entry
        written from the entries' arrays (entries_json) into its place, the rest by json.dumps."""
        if self.runs or summary:
            return json.dumps(self.data(summary), ensure_ascii=False, indent=2) + "\n"
        from symattn.kernel.entries_json import entries_text

        whole = self.comparison.whole()  # every entry decided (the JSON lists them all)
        data = comparison_data(whole, self.verdict, self.max_ulp, entries=False, keep=True)
        text = json.dumps(data, ensure_ascii=False, indent=2) + "\n"
        # the key at depth 1 with its placeholder: a string of the data holding these quotes is escaped
        held = '\n  "entries": null,\n'
        at = text.index(held)
        entries = entries_text(whole, whole.where.index)
        return text[:at] + '\n  "entries": ' + entries + ",\n" + text[at + len(held) :]

    def text(self, lang: str = "en") -> str:
        """The text ``symattn compare`` prints."""
        if self.runs:
            return self._runs_text(lang)
        every = self.listed is None
        return render_comparison(
            self.comparison, lang, every, self.listed or WORST, tolerance=self.verdict, max_ulp=self.max_ulp
        )

    def _runs_data(self) -> dict[str, Any]:
        first, spread = self.comparison, self.spread
        assert spread is not None  # a report of runs has their spread
        return {
            "quantity": first.quantity,
            "format": first.format,
            "places": convention(first),
            **order_data(first),
            "runs": [r.data(summary=True) for r in self.runs],
            "spread": {
                "entries": spread.entries,
                "differ": spread.differ,
                "ulps_apart": spread.ulps_apart,
                "ulps_apart_at": self.spread_at,
                "differ_not_finite": spread.not_finite,
            },
        }

    def _runs_text(self, lang: str) -> str:
        from symattn.rendering.environment import render_template

        num = figure_text
        places = self.comparison.where
        runs = []
        for r in self.runs:
            c, worst = r.comparison, r.comparison.worst
            runs.append(
                {
                    "source": c.source,
                    "n": c.correctly_rounded,
                    "total": len(c.entries),
                    "worst": worst,
                    "ulps": "—" if worst is None or worst.ulps is None else num(worst.ulps),
                    "at": "—" if worst is None else places.text(worst.row, worst.col),
                    "not_finite": len(c.not_finite),
                    "verdict": r.verdict,
                    "max_ulp": None if r.max_ulp is None else str(r.max_ulp),
                    "max_ulp_pass": None if r.max_ulp is None else passes_max_ulp(worst, r.max_ulp),
                }
            )
        spread = self.spread
        assert spread is not None
        return render_template(
            "compare_runs",
            "text",
            lang,
            c=self.comparison,
            count=len(self.runs),
            convention=places.convention,
            spread=spread,
            spread_at="—" if spread.cell is None else places.text(*spread.cell),
            runs=runs,
            num=num,
            place_at=lambda ij: places.text(*ij),
            out=places.measured,
        )


def judge(
    comparison: Comparison,
    result: FloatResult,
    naive: FloatResult | None = None,
    rtol: Any = None,
    atol: Any = None,
    max_ulp: Decimal | None = None,
    shape: tuple[int, ...] = (),
    listed: int | None = WORST,
) -> Report:
    """The report of a comparison with the verdict its options ask for: FlashAttention's rule with a naive
    result, torch.allclose's with ``rtol`` or ``atol`` alone (tolerance.verdict), ``max_ulp`` beside either.
    ``result`` and ``naive`` as given (before they are lined up)."""
    return Report(comparison, verdict(comparison, result, naive, rtol, atol), max_ulp, shape, listed)


def of_runs(reports: list[Report], spread: Spread) -> Report:
    """Several runs' reports as one: ``ok`` where every run is."""
    first = reports[0]
    return Report(first.comparison, first.verdict, first.max_ulp, first.shape, first.listed, tuple(reports), spread)


__all__ = ["RULES", "Report", "judge", "of_runs"]
