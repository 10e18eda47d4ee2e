"""Check hand-computed numbers against the exact model, and say why each is right or wrong.

Each claim gets one verdict (``exact``, ``rounded``, ``carried``, ``input-rounding``, ``too-coarse``,
``last-digit`` or ``wrong``;
how each is decided: :mod:`symattn.checking.verdicts`, from the claimant's own numbers carried
forward: :mod:`symattn.checking.chain`), a wrong one maybe a classic slip
(:mod:`symattn.checking.slips`); the report and its JSON: :mod:`symattn.checking.report`.
Claims name a quantity of one head (``h2.weights``, with several heads or W_O) or of the
layer; :mod:`symattn.input.quantities` lists them.

A blank (``"weights[3][1]" = ""`` in a claims file, as ``symattn exercise`` writes
them) is not a claim: it gets no verdict and is never a problem. The report lists
blanks in ``Report.blanks``, and ``report_data`` gives them under
``summary.blanks`` when there are any.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from symattn import variants
from symattn.checking.enclosure import is_supported
from symattn.checking.report import Report, Verdict
from symattn.checking.slips import diagnose_rows
from symattn.checking.verdicts import Checker
from symattn.derivation.steps import formula_scale
from symattn.exact import progress
from symattn.exact.factory import build
from symattn.input.claims import PRODUCTS, Claim, Claims, load_claims
from symattn.input.errors import EvaluationError, SpecError, UndecidedRounding, evaluating
from symattn.input.quantities import GRADIENTS, is_multihead, order
from symattn.input.spec import Spec


def _order(claim: Claim, multihead: bool) -> tuple:
    return (
        order(PRODUCTS.get(claim.quantity, claim.quantity), claim.head, multihead),
        claim.row if claim.row is not None else -1,
        claim.col if claim.col is not None else -1,
        claim.term is None,  # the terms of an entry before its sum
        claim.term or 0,
        claim.in_row_section,
        claim.quantity == "percent",
    )


def check(
    spec_or_result: Any,
    claims: Claims | Mapping[str, Any] | str,
    *,
    backward: bool = False,
    asked: Mapping[str, int] | None = None,
) -> Report:
    """Check claimed numbers against the exact values of a spec (or a Result, or a Model's spec).

    ``claims`` is a claims file path, a mapping with a ``claims`` table (inputs
    inline or by path are ignored in favour of ``spec_or_result``), or Claims.
    ``backward``: add the backward pass (L = Σ O) when the spec has no ``[backward]``, as ``--backward`` does.
    ``asked``: the decimals asked per ``decimals`` field (``{"scaled": 3}``), instead of the claims file's
    own ``decimals`` table; a claim with fewer is ``too-coarse``.
    """
    spec = getattr(spec_or_result, "spec", spec_or_result)
    model = getattr(spec_or_result, "model", None)
    if spec is None:
        loaded = load_claims(claims)
        spec = loaded.spec
    else:
        from symattn.input.spec import load_spec

        spec = load_spec(spec)
        loaded = load_claims(claims, spec=spec)
    given = spec
    spec = _numeric(spec.with_options(backward=True) if backward and spec.backward is None else spec)
    if spec.backward is None:
        gradient = next((c for c in loaded.claims if c.quantity in GRADIENTS), None)
        if gradient is not None:
            raise SpecError(
                loaded.source, gradient.key, "a claim on a gradient needs [backward] in the spec (or --backward)"
            )
    if spec.inputs == "rounded" and not is_supported(spec):
        refused = variants.rounded_refusal(spec)  # the parts that input-rounding does not cover
        plain = "one head, with Q, K and V given or projected from X (not several heads or W_O)"
        why = f"not checked with {refused} yet" if refused else f"checked for {plain}"
        raise SpecError(spec.source, "inputs", f'"rounded" is {why}')
    if model is None or spec is not given:  # a Result's model is reused when its spec is the one checked
        model = build(spec)
    checker = Checker(spec, model, loaded.claims, loaded.asked if asked is None else tuple(asked.items()))
    ordered = sorted(loaded.claims, key=lambda c: _order(c, is_multihead(spec)))
    results = diagnose_rows(
        tuple(_verdict(checker, c, loaded.source) for c in ordered), checker.slips_of, checker.position
    )
    scaling, scale_value = formula_scale(spec)  # how the report names the scaled scores
    return Report(
        spec.document.title,
        spec.document.lang,
        spec.tokens,
        spec.keys,
        loaded.source,
        results,
        paper=spec.document.page,
        cjk_font=spec.document.cjk_font,
        engine=spec.document.engine,
        blanks=loaded.blanks,
        student=loaded.student,
        softmax=spec.softmax,
        z=variants.z_word(spec),
        commas=loaded.commas,
        scaling=scaling,
        scale_value=scale_value,
    )


def _verdict(checker: Checker, claim: Claim, source: str) -> Verdict:
    progress.step("claim")
    with evaluating(source, claim.key):  # a rounding that cannot be decided names the claim
        try:
            return checker.verdict(claim)
        except UndecidedRounding as exc:
            if (exc.quantity, exc.row, exc.col) != (claim.quantity, claim.row, claim.col):
                raise
            # a tie at d decimals has d + 1 of them, and no tie at more: the claimant can settle it
            raise EvaluationError(f"{exc}; more decimals in the claim settle it") from None


def _numeric(spec: Spec) -> Spec:
    """The spec whose numbers are checked: values substituted for symbols."""
    if spec.is_symbolic:
        from symattn.exact.symbolic import substitute

        missing = sorted(set(spec.symbols) - {name for name, _ in spec.subs})
        if missing:
            raise SpecError(
                spec.source, "subs", "give a value for every symbol to check numbers; missing: " + ", ".join(missing)
            )
        spec = substitute(spec)
    return spec


__all__ = ["check"]
