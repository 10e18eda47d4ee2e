"""The numeric engine behind the enclosures: python-flint, or mpmath as the fallback.

Both engines turn exact inputs into rigorous :class:`~symattn.exact.numeric.Fixed` boxes; the
rounding decisions (:mod:`symattn.exact.numeric`) are made on those boxes alone, so the digits
shown are the same whichever engine enclosed them (correct rounding is unique). Only the
widths of the boxes, and so the ``bounds`` of ``compute --certify``, may differ.

- ``flint``: FLINT's arb balls for every exp (one ``exp`` of a ball per entry) and an exact
  ``fmpz_mat`` product for the weighted sums of the output. SymPy already loads python-flint
  for its own ground types when it is installed, so this costs no start-up time.
- ``mpmath``: mpmath's correctly rounded ``mpf_exp`` and Python integers.

The flint engine is used when python-flint can be imported; ``SYMATTN_ENGINE=mpmath`` (or
:func:`use`) selects the other one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from symattn.exact import numeric
from symattn.exact.numeric import Fixed
from symattn.input.errors import EvaluationError, brief

ENGINES = ("flint", "mpmath")
VARIABLE = "SYMATTN_ENGINE"
_chosen: str | None = None  # set by use(); otherwise the environment decides


def name() -> str:
    """The engine in use: "flint" when python-flint imports (unless SYMATTN_ENGINE=mpmath), else "mpmath"."""
    choice = _chosen or os.environ.get(VARIABLE, "").strip().lower() or None
    if choice not in (None, *ENGINES):
        raise EvaluationError(f"{VARIABLE}={brief(choice)}: expected one of {', '.join(ENGINES)}")
    if choice == "mpmath":
        return "mpmath"
    if _has_flint():
        return "flint"
    if choice == "flint":
        raise EvaluationError(f"{VARIABLE}=flint, but python-flint is not installed (pip install python-flint)")
    return "mpmath"


def _has_flint() -> bool:
    try:
        import flint  # noqa: F401
    except ImportError:
        return False
    return True


@contextmanager
def use(engine: str) -> Iterator[None]:
    """Select an engine for the models built inside (tests compare the two)."""
    global _chosen
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
    saved, _chosen = _chosen, engine
    try:
        name()  # fails now if flint is asked for and missing
        yield
    finally:
        _chosen = saved


def exps(
    rows: Sequence[Sequence[int | None]], den: int, c: Fixed, prec: int, bits: int, engine: str
) -> list[list[Fixed]]:
    """e^(n · c / den) for every integer n of ``rows`` (0 where n is None: e^−∞), at 2**-bits.

    ``c`` encloses the scale; ``prec`` is the working precision of the exps, at least ``c.bits``.
    """
    if engine == "flint":
        return _flint_exps(rows, den, c, prec, bits)
    zero = Fixed(0, 0, bits)
    out = []
    for row in rows:
        boxes = []
        for n in row:
            if n is None:
                boxes.append(zero)
                continue
            lo, hi = (n * c.lo, n * c.hi) if n >= 0 else (n * c.hi, n * c.lo)
            z = Fixed(lo // den, -(-hi // den), c.bits)
            boxes.append(numeric.exp_fixed(z, prec, bits))
        out.append(boxes)
    return out


def _flint_exps(rows: Sequence[Sequence[int | None]], den: int, c: Fixed, prec: int, bits: int) -> list[list[Fixed]]:
    from flint import arb, ctx

    saved = ctx.prec
    ctx.prec = prec
    try:
        # the scale over the denominator as one ball: [c.lo, c.hi] · 2^-c.bits / den
        scale = arb((c.lo + c.hi, -c.bits - 1), (c.hi - c.lo, -c.bits - 1)) / den
        zero = Fixed(0, 0, bits)
        return [[zero if n is None else _to_fixed((scale * n).exp(), bits) for n in row] for row in rows]
    finally:
        ctx.prec = saved


def _to_fixed(x, bits: int) -> Fixed:
    """An arb ball as integers at 2**-bits: floor of its lower end, ceiling of its upper end, exactly."""
    if not x.is_finite():  # asked, not caught as a ValueError: the time limit's LimitError is one too
        raise EvaluationError("value is not finite")
    man, exp = x.mid().man_exp()
    rman, rexp = x.rad().man_exp()
    man, shift = int(man), int(exp) + bits
    if shift >= 0:
        lo = hi = man << shift
    else:
        lo, hi = man >> -shift, -((-man) >> -shift)
    rman, shift = int(rman), int(rexp) + bits
    rad = rman << shift if shift >= 0 else -((-rman) >> -shift)  # rounded up
    return Fixed(lo - rad, hi + rad, bits)


def weighted_sums(
    rows: Sequence[Sequence[Fixed]], columns: Sequence[Sequence[int]], den: int, bits: int, engine: str
) -> list[list[Fixed]]:
    """Σ_j box_ij · columns[k][j] / den for each row i and column k, enclosed.

    Each box is mid ± rad: the mids go through one exact integer product, the radii bound the rest.
    """
    if engine != "flint" or not rows or not columns:
        return [numeric.weighted_sums(row, columns, den, bits) for row in rows]
    from flint import fmpz_mat

    mids = fmpz_mat([[(lo + hi) >> 1 for lo, hi, _ in row] for row in rows])
    totals = (mids * fmpz_mat(columns).transpose()).tolist()
    weights = [sum(map(abs, col)) for col in columns]
    out = []
    for row, sums in zip(rows, totals):
        rad = max(hi - lo for lo, hi, _ in row) + 1
        out.append(
            [
                Fixed((t - err) // den, -((-t - err) // den), bits)
                for t, err in zip(map(int, sums), [rad * w for w in weights])
            ]
        )
    return out


__all__ = ["ENGINES", "VARIABLE", "exps", "name", "use", "weighted_sums"]
