"""``assert_attention_close``: a kernel's attention against the exact values, as a test asserts it.

    from symattn.testing import assert_attention_close

    out = my_kernel(q, k, v, causal=True)
    assert_attention_close(out, q, k, v, causal=True)                       # torch.testing's tolerances
    assert_attention_close(out, q, k, v, causal=True, rule="flash", reference=naive)  # FlashAttention's

It takes what :func:`symattn.kernel.compare` takes, raises ``AssertionError`` where the check fails (its
first line names the rule, its figure and the worst place, ``out[1, 2, 77, 5]``, then the whole report)
and returns the :class:`~symattn.kernel.report.Report` where it holds.

The default rule is the one attention kernels are tested by, measured against the exact values rather
than a float reference: |out − exact| ≤ atol + rtol·|exact| for every entry, with the (rtol, atol) of the
result's dtype that PyTorch's own SDPA tests use (``default_rtol``/``default_atol`` in its
test/test_transformers.py, which vLLM's kernel tests take too): float16 1e-3, 1e-3; bfloat16 1.6e-2,
1e-3; float32 1.3e-6, 1e-5; and torch.testing's 1e-7, 1e-7 for float64. An atol of torch.testing's
1e-5 would fail a correct bfloat16 kernel wherever an output cancels to near 0. There is none for
float8: give rtol and atol, or another rule. With ``reference`` (the naive attention in the kernel's
dtype) the default is FlashAttention's rule; with ``max_ulp`` alone, every error at most that many ULP.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

from symattn.input.decimals import significant_exact
from symattn.input.errors import SpecError, SymattnError
from symattn.kernel.comparison import figure_text
from symattn.kernel.report import Report
from symattn.kernel.tolerance import fraction_text

# (rtol, atol) for each dtype, as exact decimals: PyTorch's SDPA tests' (torch.testing's for float64)
PRECISIONS = {
    "float16": (Fraction(1, 10**3), Fraction(1, 10**3)),
    "bfloat16": (Fraction(16, 10**3), Fraction(1, 10**3)),
    "float32": (Fraction(13, 10**7), Fraction(1, 10**5)),
    "float64": (Fraction(1, 10**7), Fraction(1, 10**7)),
}


def assert_attention_close(out: Any, q: Any, k: Any, v: Any, **options: Any) -> Report:
    """Assert that ``out`` is close to the exact attention of ``q``, ``k``, ``v`` (keywords as
    :func:`symattn.kernel.compare`'s); return the report where it is, raise ``AssertionError`` where not."""
    from symattn.kernel.oracle import compare

    __tracebackhide__ = True  # pytest shows the test's line, not this function's
    try:
        given = with_tolerances(out, options)
        report = compare(out, q, k, v, **given)
    except SymattnError as exc:  # a one-line refusal of the inputs: raised from here, not from the engine
        raise exc.with_traceback(None) from None
    if not report.ok:
        raise AssertionError(failure(report) + _hint(report, options, given) + "\n\n" + report.text())
    return report


LOW = ("bfloat16", "float16")  # where the field tests by FlashAttention's rule


def _hint(report: Report, options: dict[str, Any], given: dict[str, Any]) -> str:
    """Where PyTorch's floors (the default, no tolerance given) fail a bfloat16 or float16 kernel: the rule
    such kernels are tested by. Their weights rounded to the dtype leave about 2^-9 of |v| where an output
    cancels, past 1e-3 + 0.016·|exact| (torch's CPU SDPA in bfloat16 fails 8 of 12 short causal runs)."""
    chosen = options.get("rule") is None and options.get("rtol") is None and options.get("atol") is None
    formats = {r.comparison.format for r in report.runs or (report,)}
    if not chosen or given.get("rule") != "allclose" or not formats & set(LOW):
        return ""
    return (
        "\n(the default tolerances are PyTorch's floors; a bfloat16 or float16 kernel is tested by "
        'FlashAttention\'s rule: rule="flash", reference=the naive attention in its dtype; docs/pytest.md)'
    )


def with_tolerances(out: Any, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the rule this module's default picks: allclose with the (rtol, atol) of ``out``'s dtype
    (PRECISIONS) for a tolerance not given, unless a reference or ``max_ulp`` asks for another rule."""
    from symattn.kernel.oracle import runs_of
    from symattn.kernel.tensors import exact_array

    rule = options.get("rule")
    implied = options.get("reference") is not None or options.get("max_ulp") is not None
    if rule == "allclose" or (rule is None and not implied):
        fmt = exact_array(runs_of(out)[0], "out").format
        if fmt not in PRECISIONS and (options.get("rtol") is None or options.get("atol") is None):
            raise SpecError("rtol", None, f"no default tolerances for {fmt} results: give rtol and atol")
        rtol, atol = PRECISIONS.get(fmt, (None, None))
        options = {**options, "rule": "allclose"}
        if options.get("rtol") is None:
            options["rtol"] = rtol
        if options.get("atol") is None:
            options["atol"] = atol
    return options


def failure(report: Report) -> str:
    """One line per failing run: the rule, its figure, the worst place and its value against the exact one."""
    lines = []
    for r in report.runs or (report,):
        c, v = r.comparison, r.verdict
        source = "" if not report.runs else f"{c.source}: "
        if c.not_finite:
            (i, j), value = c.not_finite[0]
            lines.append(f"{source}out is not finite at {c.where.text(i, j)}: {value}")
        elif v is not None and not v.passed:
            rtol, atol = fraction_text(v.rtol), fraction_text(v.atol)
            if v.rule == "flash":
                rule = f"FlashAttention's rule max|out − exact| ≤ {rtol}·max|reference − exact| + {atol}"
                figure = "ratio undefined" if v.ratio is None else f"ratio {figure_text(v.ratio)}"
                figure += ", the largest |out − exact|"
            else:
                rule = f"torch.allclose's rule |out − exact| ≤ {atol} + {rtol}·|exact|"
                share = "∞" if v.share is None else figure_text(v.share)
                figure = f"|out − exact| / (atol + rtol·|exact|) = {share}"
            lines.append(f"{source}fails {rule}: {figure} at {_entry(r, v.worst)}")
        if r.max_ulp is not None and r.rule is not None and not _max_ulp_ok(r):
            worst = c.worst
            assert worst is not None and worst.ulps is not None  # a bound fails only on an error
            over = c.entries.over(r.max_ulp)
            lines.append(
                f"{source}fails max_ulp={r.max_ulp}: {over} of {len(c.entries)} entries exceed it; the largest "
                f"error is {figure_text(worst.ulps)} ULP at {_entry(r, (worst.row, worst.col))}"
            )
    return "\n".join(lines)


def _max_ulp_ok(r: Report) -> bool:
    from symattn.kernel.comparison_report import passes_max_ulp

    return r.max_ulp is None or passes_max_ulp(r.comparison.worst, r.max_ulp)


def _entry(r: Report, at: tuple[int, int] | None) -> str:
    """``out[1, 2, 77, 5] (out 0.4123, exact 0.1623)``."""
    if at is None:
        return "—"
    c = r.comparison
    e = c.entries.entry(*at)
    value = "—" if e.value is None else str(significant_exact(e.value, 9))
    return f"{c.where.text(*at)} (out {value}, exact {_nine_decided(e.exact)})"


def _nine_decided(exact: Decimal) -> str:
    """The exact value to 9 significant digits where its decided digits fix them, else every decided digit:
    fewer than 9 were decided (a saturated gradient's 0.952760 is not 0.952760000), or the decided value lies
    on a 9-digit half-way point, which the exact value may lie on either side of."""
    digits = exact.as_tuple().digits
    if len(digits) <= 9 or (digits[9] == 5 and not any(digits[10:])):
        return str(exact)
    return str(significant_exact(Fraction(exact), 9))


__all__ = ["PRECISIONS", "assert_attention_close", "failure", "with_tolerances"]
