"""Every intermediate of the exact model as JSON-ready data, for scripts.

``exact`` holds SymPy's ``str()`` of each closed form; ``value`` holds decimal
strings correctly rounded to a number of significant digits.
"""

from __future__ import annotations

from typing import Any

from .model import Model, build_model
from .spec import Matrix, Spec

MAX_DIGITS = 1000
MATRICES = ("scores", "scaled", "exp", "weights", "output")


class _Printer:
    """str() of SymPy expressions, each distinct subexpression printed once.

    A row's sum of exps appears in every weight and output of that row; SymPy's
    printer would order and print it again each time.
    """

    def __init__(self) -> None:
        from sympy.printing.str import StrPrinter

        memo: dict = {}

        class Memo(StrPrinter):
            def _print(self, expr, **kwargs):  # same text as str(expr): printing is context-free
                if kwargs:
                    return super()._print(expr, **kwargs)
                if expr not in memo:
                    memo[expr] = super()._print(expr)
                return memo[expr]

        self.printer = Memo()

    def __call__(self, expr: Any) -> str:
        return self.printer.doprint(expr)


def _entry(source: Any, quantity: str, digits: int, printer: _Printer | None = None,
           exact: bool = True) -> dict[str, Any]:
    values = source.significant(quantity, digits)
    out = {"value": [[_text(v) for v in row] for row in values]}
    if exact:
        forms = source.exact(quantity) if hasattr(source, "exact") else getattr(source, quantity)
        show = printer or _Printer()
        out = {"exact": [[show(x) for x in forms.row(i)] for i in range(forms.rows)], **out}
    return out


def _text(value: Any) -> str:
    return "-inf" if value.is_infinite() else str(value)


def _head(model: Model, digits: int, exact: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"d_k": model.d_k}
    printer = _Printer()
    for scalar in ("scale", "sqrt_dk"):
        entry = _entry(model, scalar, digits, printer, exact)
        out[scalar] = {key: rows[0][0] for key, rows in entry.items()}
    for quantity in MATRICES:
        out[quantity] = _entry(model, quantity, digits, printer, exact)
        if quantity == "exp":
            column = _entry(model, "exp_sum", digits, printer, exact)
            out["exp_sum"] = {key: [r[0] for r in rows] for key, rows in column.items()}
    return out


def _exact_matrix(m: Matrix) -> dict[str, Any]:
    return {"exact": [[str(x.value) for x in row] for row in m]}


def compute(spec: Spec, model: Model | None = None, digits: int = 15, exact: bool = True) -> dict[str, Any]:
    """All intermediates, each exact and to ``digits`` significant digits.

    ``exact=False`` leaves out the closed forms: printing them is most of the
    time for large inputs.
    """
    if not isinstance(digits, int) or isinstance(digits, bool) or not 1 <= digits <= MAX_DIGITS:
        raise ValueError(f"digits must be an integer from 1 to {MAX_DIGITS}, got {digits!r}")
    if spec.is_symbolic:
        return _symbolic(spec, digits)
    out: dict[str, Any] = {"tokens": list(spec.tokens)}
    if spec.is_cross:
        out["key_tokens"] = list(spec.key_tokens)
    if spec.projection is not None:
        out.update(Q=_exact_matrix(spec.Q), K=_exact_matrix(spec.K), V=_exact_matrix(spec.V))
    out["mask"] = [[spec.allowed is None or spec.allowed[i][j] for j in range(len(spec.keys))]
                   for i in range(len(spec.tokens))]
    if spec.heads == 1 and spec.W_O is None:
        out.update(_head(model or build_model(spec), digits, exact))
        return out
    from .multihead import build_multihead
    mh = build_multihead(spec)
    out["d_model"] = len(spec.Q[0])
    out["heads"] = [_head(h, digits, exact) for h in mh.heads]
    out["concat"] = _entry(mh, "concat", digits, exact=exact)
    out["output"] = _entry(mh, "output", digits, exact=exact)
    return out


def _symbolic(spec: Spec, digits: int) -> dict[str, Any]:
    """Formulas in the symbols; with a value for each symbol, the numbers too."""
    from .symbolic import build_symbolic, has_all_values, substitute
    model = build_symbolic(spec)
    out: dict[str, Any] = {"tokens": list(spec.tokens), "symbols": list(spec.symbols),
                           "subs": {name: value.text for name, value in spec.subs}}
    out["formulas"] = {q: [[str(x) for x in getattr(model, q).row(i)] for i in range(getattr(model, q).rows)]
                       for q in ("scores", "scaled", "exp", "weights", "output")}
    if has_all_values(spec):
        out["values"] = compute(substitute(spec), digits=digits)
    return out
