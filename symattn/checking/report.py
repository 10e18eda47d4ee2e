"""The data of a check report: a verdict per claim, with its explanation, and ``report_data``, the report as JSON.

``VERDICTS`` are the verdicts a claim can get, in the order they are tried (what each
means: :mod:`symattn.checking.verdicts`); the counts list the ``OPTIONAL`` ones only where a claim has them.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from symattn.exact.rounding import Num
from symattn.input.claims import Claim, Written
from symattn.input.records import record

if TYPE_CHECKING:
    from symattn.checking.closed import Closed

VERDICTS = ("exact", "rounded", "carried", "input-rounding", "too-coarse", "last-digit", "wrong")
OPTIONAL = ("input-rounding", "too-coarse")  # only with inputs = "rounded", or asked decimals
PROBLEMS = ("too-coarse", "last-digit", "wrong")


@record
class Explanation:
    """How the right number comes about, with the user's inputs: operands and result."""

    quantity: str
    row: int | None
    col: int | None
    operands: tuple[Any, ...]  # Numerals, Nums, or pairs of them for sums of products
    result: Num
    affine: bool = False  # operands are (pairs, bias or None): X W + b, concat W_O + b_O
    summed: bool = False  # operands are numbers that add up: a shared K's or V's gradient over its query heads


@record
class Verdict:
    claim: Claim
    verdict: str
    truncated: bool
    value: Num  # the exact value to SIGNIFICANT digits
    closed_form: Closed  # str() is SymPy's text; .expr the expression
    # the exact value rounded to the claim's decimals (a Num m·10^k for a claim written so: claim_notation)
    expected: Decimal | Num | None
    carried: Decimal | Num | None  # what the claimant's own numbers give at those decimals
    explanation: Explanation | None
    row_label: str | int | None  # the query or key token, or a 1-based row (an input dimension of dW_Q)
    col_label: str | int | None  # the key token, or a 1-based column
    masked: bool = False  # a finite claim on a masked score, compared with the score before the mask
    diagnosis: str | None = None  # a wrong claim that one of the classic slips (SLIPS) gives exactly
    row_axis: str | None = "token"  # what the rows are: token, key, dim (a row of the matrix), input (dimension)
    col_axis: str | None = "key"  # and the columns: key, dim (a column), input (dimension)
    # "unshifted": an exp claimed as e^z where the document shows e^(z − max); "from_terms": a too-coarse sum
    # of the claimant's own terms
    note: str | None = None
    asked: int | None = None  # too-coarse: the decimals asked (in the claim's unit), ``expected`` is at them
    rounded_inputs: tuple[str, ...] = ()  # input-rounding: the inputs whose rounding explains it (Q[3], K, V[:,1])

    @property
    def head(self) -> int | None:
        """The 0-based head of a per-head claim, or of the columns an hN.Q, hN.K, hN.V claim names."""
        return self.claim.head if self.claim.head is not None else self.claim.prefix

    @property
    def is_problem(self) -> bool:
        return self.verdict in PROBLEMS


@record
class Report:
    title: str | None
    lang: str
    tokens: tuple[str, ...]
    key_tokens: tuple[str, ...]
    source: str
    results: tuple[Verdict, ...]  # in the order of the derivation
    builtin: bool = False  # the claims file is a built-in example (the report says so in its language)
    paper: str = "a4"  # "a4" or "letter"
    cjk_font: str | None = None
    engine: str | None = None
    blanks: tuple[str, ...] = ()  # keys left blank (""), not checked
    student: str | None = None  # the claims file's ``student`` id
    softmax: str = "plain"  # "stable": the exps claimed are e^(z − max), and the report names them so
    # "biased" or "capped" (a part's, symattn.variants.z_word): the claimed scaled scores are z, not S/√d_k,
    # and the report names them so
    z: str | None = None
    # the scaling the report names the scaled scores by: "sqrt" (S/√d_k), "none" (z = S) or "number" (S × scale_value)
    scaling: str = "sqrt"
    scale_value: Any = None
    commas: tuple[Written, ...] = ()  # claims with a decimal comma, read as a point (key first)

    @property
    def counts(self) -> tuple[tuple[str, int], ...]:
        counts = ((v, sum(r.verdict == v for r in self.results)) for v in VERDICTS)
        return tuple((v, n) for v, n in counts if n or v not in OPTIONAL)

    @property
    def first_problem(self) -> Verdict | None:
        """The first wrong, last-digit or too-coarse claim in the order of the derivation: fix it first."""
        return next((r for r in self.results if r.is_problem), None)

    @property
    def precision_lost(self) -> Verdict | None:
        """The first claim with fewer decimals than asked: where the chain lost its precision."""
        return next((r for r in self.results if r.verdict == "too-coarse"), None)

    @property
    def carried_after_lost(self) -> bool:
        """Whether some claim after the lost precision is carried: what the summary says is counted so."""
        lost = self.precision_lost
        return lost is not None and any(r.verdict == "carried" for r in self.results[self.results.index(lost) + 1 :])

    @property
    def ok(self) -> bool:
        return self.first_problem is None

    def data(self) -> dict[str, Any]:
        """The report as JSON-ready data (:func:`report_data`): what its JSON export writes."""
        return report_data(self)


def report_data(report: Report) -> dict[str, Any]:
    """The report as JSON-ready data: one object per claim, then a summary."""

    def text(x: Decimal | Num | None) -> str | None:
        if isinstance(x, Num):  # a value shown m·10^k keeps its exponent (1.187E-3071), as it is shown
            return str(x.value) if x.scientific else format(x.value, "f")
        return None if x is None else format(x, "f")

    claims = [
        {
            "quantity": v.claim.quantity,
            "row": v.row_label,
            "col": v.col_label,
            "claimed": v.claim.number.text,
            "exact": str(v.closed_form),
            "value": text(v.value),
            "verdict": v.verdict,
            "truncated": v.truncated,
            "expected": text(v.expected),
            "carried": text(v.carried),
            "key": v.claim.key,
            "diagnosis": v.diagnosis,
            "head": None if v.head is None else v.head + 1,
            "note": v.note,
            "asked": v.asked,
            "rounded_inputs": list(v.rounded_inputs),
            **({} if v.claim.term is None else {"term": v.claim.term + 1}),  # a partial product's term, 1-based
        }
        for v in report.results
    ]
    first = report.first_problem
    summary: dict[str, Any] = {
        "counts": dict(report.counts),
        "first_wrong": None if first is None else claims[report.results.index(first)],
    }
    if report.blanks:
        summary["blanks"] = list(report.blanks)
    lost = report.precision_lost
    if lost is not None:
        summary["precision_lost"] = claims[report.results.index(lost)]
    if report.commas:
        summary["decimal_commas"] = [w.key for w in report.commas]
    return {"claims": claims, "summary": summary}


__all__ = ["Explanation", "OPTIONAL", "PROBLEMS", "Report", "VERDICTS", "Verdict", "report_data"]
