"""Every intermediate of the exact model as JSON-ready data, for scripts.

``exact`` holds SymPy's ``str()`` of each closed form; ``value`` holds decimal
strings correctly rounded to a number of significant digits.
"""

from __future__ import annotations

from typing import Any

from .model import Model
from .spec import Spec

MAX_DIGITS = 1000
MATRICES = ("scores", "scaled", "exp", "weights", "output")


def _entry(model: Model, quantity: str, digits: int) -> dict[str, Any]:
    exact = model.exact(quantity)
    values = model.significant(quantity, digits)
    return {
        "exact": [[str(x) for x in exact.row(i)] for i in range(exact.rows)],
        "value": [[str(v) for v in row] for row in values],
    }


def compute(spec: Spec, model: Model, digits: int = 15) -> dict[str, Any]:
    """All intermediates, each exact and to ``digits`` significant digits."""
    if not isinstance(digits, int) or isinstance(digits, bool) or not 1 <= digits <= MAX_DIGITS:
        raise ValueError(f"digits must be an integer from 1 to {MAX_DIGITS}, got {digits!r}")
    out: dict[str, Any] = {"tokens": list(spec.tokens), "d_k": spec.d_k}
    for scalar in ("scale", "sqrt_dk"):
        entry = _entry(model, scalar, digits)
        out[scalar] = {"exact": entry["exact"][0][0], "value": entry["value"][0][0]}
    for quantity in MATRICES:
        out[quantity] = _entry(model, quantity, digits)
        if quantity == "exp":
            column = _entry(model, "exp_sum", digits)
            out["exp_sum"] = {"exact": [r[0] for r in column["exact"]], "value": [r[0] for r in column["value"]]}
    return out
