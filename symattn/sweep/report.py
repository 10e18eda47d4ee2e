"""A sweep's report: every case's row, in the grid's order, as JSON or as a table a person reads.

The same grid, seed and kernel give the same report, byte for byte, but for each row's ``seconds`` and
``worker``: the rows are sorted by case, whatever order the workers finished them in.
"""

from __future__ import annotations

import json
from typing import Any

from symattn.input.records import record
from symattn.sweep.grid import VARIANTS, Grid


@record
class SweepReport:
    grid: Grid
    kernel: str
    rows: tuple[dict[str, Any], ...]  # one per case, by case

    @property
    def failed(self) -> int:
        return sum(1 for r in self.rows if r["verdict"] != "pass")

    @property
    def ok(self) -> bool:
        return self.failed == 0

    def data(self) -> dict[str, Any]:
        g = self.grid
        return {
            "grid": g.source,
            "digest": g.digest,
            "kernel": self.kernel,
            "seed": g.seed,
            "rule": g.rule,
            "rtol": g.rtol,
            "atol": g.atol,
            "max_ulp": g.max_ulp,
            "kinds": list(g.kinds),
            "causal_align": g.causal_align,
            "device": g.device,
            "passed": len(self.rows) - self.failed,
            "failed": self.failed,
            "cases": list(self.rows),
        }

    def to_json(self) -> str:
        return json.dumps(self.data(), ensure_ascii=False, indent=2) + "\n"

    def text(self) -> str:
        g = self.grid
        kinds = ", ".join(g.kinds)
        lines = [f"{self.kernel} on {g.source}: {len(self.rows)} cases, rule {g.rule}, kinds {kinds}, seed {g.seed}"]
        variants = [v for v in VARIANTS if v in g.lists]
        header = ["case", "batch", "heads", "kv", "seqlen", "head_dim", "dtype", "causal", *variants]
        header += ["verdict", "kind", "figure", "place", "seconds", "worker"]
        cells = [header] + [_cells(r, variants) for r in self.rows]
        widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(cell, widths)).rstrip() for cell in cells]
        lines.append(f"{len(self.rows) - self.failed} of {len(self.rows)} cases pass; {self.failed} fail.")
        failing = [r for r in self.rows if r["verdict"] != "pass"]
        if failing:
            lines += ["", "Why each failing case fails:"]
            lines += [f"  case {r['case']}: {_why(r)}" for r in failing]
        return "\n".join(lines) + "\n"


def _cells(r: dict[str, Any], variants: list[str]) -> list[str]:
    def pair(a: str, b: str) -> str:
        return str(r[a]) if r[a] == r[b] else f"{r[a]}×{r[b]}"

    shown = [str(r["case"]), str(r["batch"]), str(r["heads"]), str(r["kv_heads"]), pair("seqlen_q", "seqlen_k")]
    shown += [pair("head_dim_qk", "head_dim_v"), r["dtype"], "yes" if r["causal"] else "no"]
    shown += [_variant(r[v]) for v in variants]
    shown += [r["verdict"], r["kind"] or "—", r["figure"] or "—", r["place"] or "—", f"{r['seconds']:.2f}", r["worker"]]
    return shown


def _variant(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "—" if not value else f"{value:g}" if isinstance(value, float) else str(value)


def _why(r: dict[str, Any]) -> str:
    """The case's own failure, or each failing check's (one line each, the first line of a long message)."""
    if not r["checks"]:
        return r["message"] or "—"
    failing = [c for c in r["checks"] if c["verdict"] != "pass"]
    return "; ".join(f"{c['kind']}: {(c['message'] or '—').splitlines()[0]}" for c in failing)


__all__ = ["SweepReport"]
