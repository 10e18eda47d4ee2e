"""The page's practice mode, server side: the hint of one step, the formula with the student's numbers in it.

The student works the focus row one quantity at a time (:data:`STEPS`); the verdicts come from POST
/api/check, as in the check tab. POST /api/hint ``{"spec": {…}, "quantity": …, "claims": {…}}`` answers
``{"html": …}``: the phrase of ``[practice.hint]`` and the formula of that quantity
(``templates/hint.markdown.j2``), its operands the student's earlier numbers (read by the claims reader,
so only numbers reach TeX) or, for the scores, the inputs. Nothing is worked out: a hint never gives a
result away.
"""

from __future__ import annotations

from typing import Any

from symattn.input.errors import SpecError
from symattn.web.body import REQUEST_SOURCE, claims_of, request_fields, request_reader, spec_of

# the practice steps, in order: the check tab's quantities of one row (percent is the weights again)
STEPS = ("scores", "scaled", "exp", "exp_sum", "weights", "output")


def hint_task(body: Any) -> dict[str, Any]:
    """POST /api/hint: the hint of one practice step, as an HTML fragment (math as TeX, for KaTeX)."""
    from symattn.derivation.derive import derive
    from symattn.derivation.steps import WeightedSum
    from symattn.exact.factory import build
    from symattn.rendering.environment import render_template
    from symattn.rendering.html import markdown_to_html

    reader = request_reader(REQUEST_SOURCE)
    body = request_fields(body, ("spec", "quantity", "claims"), ("spec", "quantity"))
    quantity = reader.choice(body["quantity"], "quantity", STEPS)
    spec = spec_of(body["spec"])
    claims = claims_of(spec, body.get("claims", {}))  # one head only, as the check tab
    derivation = derive(spec, build(spec))
    steps = {step.kind: step for step in derivation.steps}
    values = steps.get("weighted_sum")
    if derivation.symbolic or not isinstance(values, WeightedSum) or not {"scores", "scaling"} <= steps.keys():
        raise SpecError(spec.source, "symbols", "practice mode works with numbers; use the derivation tab")
    focus = derivation.focus
    mine = {(c.quantity, c.col): c.number for c in claims.claims if c.row == focus and c.head is None}
    markdown = render_template(
        "hint",
        "markdown",
        derivation.lang,
        d=derivation,
        quantity=quantity,
        mine=mine,
        columns=range(len(derivation.key_tokens)),
        outputs=range(len(values.V[0])),
        scores=steps["scores"],
        scaling=steps["scaling"],
        values=values,
    )
    html, _ = markdown_to_html(markdown)
    return {"html": html}
