"""Every entry decided at kernel sizes, float64's ends met with the error-free product's (compensated.met, from
heads.PRODUCT_WORK multiply-adds): the ends against 50-digit mpmath on adversarial heads (cancellation, exps
underflowed, masks, d = 1, sizes not powers of two, subnormal float32 inputs); where the product declines,
float64's ends bit for bit; and the JSON of every entry with every figure it had, each exact value's digits
as many or more (but where arb's 17 are no longer asked for), every one right."""

from __future__ import annotations

import json
from decimal import Decimal

import mpmath
import numpy as np
import pytest

from symattn.certificates import float_tensors
from symattn.kernel import compensated, float64
from symattn.kernel import heads as kernel
from symattn.kernel.comparison_report import comparison_data
from tests.test_exact_product import exact_outputs, float32
from tests.test_kernel_every_entry import naive


def adversarial(case: str) -> float64.Head:
    rng = np.random.default_rng(len(case))
    n, m, d, dv, allowed = 37, 300, 8, 4, None
    Q, K, V = (rng.standard_normal(s) for s in ((n, d), (m, d), (m, dv)))
    if case == "cancellation":  # scores near 0, so e ≈ 1: Σ e·v of ±1 cancels to near 0 (exactly 0 in row 0)
        Q[0] = 0.0
        Q *= 2.0**-12
        V[:, 0] = np.where(np.arange(m) % 2, 1.0, -1.0)
        V[:, 1] = V[:, 0] * (1 + 2.0**-20 * (np.arange(m) % 3))
    elif case == "underflow":  # scores hundreds apart: most exps below e^-700, 0 within TINY
        Q *= 60.0
        K *= 60.0
    elif case == "masked":  # causal, bottom-right, and one row that sees a single key
        allowed = np.tril(np.ones((n, m), dtype=bool), m - n)
        allowed[5] = False
        allowed[5, 17] = True
    elif case == "d=1":
        Q, K = Q[:, :1] * 8, K[:, :1]
    elif case == "subnormal":  # float32 subnormals in Q, K and V
        Q[::3] *= 2.0**-140
        K[::4] *= 2.0**-135
        V = np.round(V * 64) * 2.0**-149
    head = float64.head(float32(Q), float32(K), float32(V), None, allowed)
    assert head is not None
    return head


@pytest.mark.parametrize("case", ["plain", "cancellation", "underflow", "masked", "d=1", "subnormal"])
def test_met_ends_hold_the_exact_outputs_and_lie_within_float64s(case):
    head = adversarial(case)
    lo, hi, held = compensated.met(head, (0, head.Q.shape[0]))
    f_lo, f_hi = kernel.intervals(head, "output")
    assert held.all()
    assert (lo >= f_lo).all() and (hi <= f_hi).all()  # met: inside float64's ends, so no digit fewer shown
    for i, row in enumerate(exact_outputs(head)):
        for k, x in enumerate(row):
            assert mpmath.mpf(lo[i, k]) <= x <= mpmath.mpf(hi[i, k]), (case, i, k)
    assert ((hi - lo) < (f_hi - f_lo)).all()  # the product's ends narrower, every one


def test_where_the_product_declines_the_ends_are_float64s_bit_for_bit():
    """Exps near e^-690 (a sink above every score) times float32 subnormals: the product declines."""
    rng = np.random.default_rng(12)
    rows = {name: float32(rng.standard_normal((8, 4))) for name in "QK"}
    rows["V"] = np.round(rng.standard_normal((8, 3)) * 4) * 2.0**-149
    head = float_tensors.build(rows, 1, 1, 1, "bhnd", None, None, logits=(690.0,)).heads[0]
    lo, hi, held = compensated.met(head, (0, 8))
    f_lo, f_hi = kernel.intervals(head, "output")
    assert not held.any()
    assert lo.view(np.int64).tolist() == f_lo.view(np.int64).tolist()
    assert hi.view(np.int64).tolist() == f_hi.view(np.int64).tolist()


def digits(text: str) -> int:
    return len(Decimal(text).as_tuple().digits)


def right(text: str, x: mpmath.mpf) -> bool:
    """Every digit of ``text`` is x's: x lies within half a unit of its last digit."""
    unit = mpmath.mpf(10) ** Decimal(text).as_tuple().exponent
    return abs(mpmath.mpf(text) - x) <= unit / 2


def test_every_entry_json_keeps_every_figure_and_its_digits_are_more_and_right(monkeypatch):
    head, result = naive(300, 16, 5)
    before = json.loads(json.dumps(comparison_data(kernel.compare_head([head], result, "output", None))))
    monkeypatch.setattr(kernel, "PRODUCT_WORK", 0)
    monkeypatch.setattr(kernel, "PARALLEL_WORK", 0)  # pieces of rows in forked processes, as at kernel sizes
    after = json.loads(json.dumps(comparison_data(kernel.compare_head([head], result, "output", None))))
    # how many entries arb refines depends on the BLAS's last bits (OpenBLAS's Haswell and SkylakeX kernels
    # differ): the product leaves it fewer, and each one it no longer refines is counted below
    assert before["engine"]["path"] == after["engine"]["path"] == "float64"
    assert before["engine"]["refined"] > after["engine"]["refined"] > 0
    for key in ("summary", "not_finite", "places", "source", "quantity", "format"):
        assert before[key] == after[key], key
    exact = exact_outputs(head)
    changed = fewer = 0
    for old, new in zip(before["entries"], after["entries"], strict=True):
        assert {**old, "exact": None} == {**new, "exact": None}
        if old["exact"] == new["exact"]:
            continue
        changed += 1
        assert right(new["exact"], exact[new["query"]][new["column"]])
        if digits(new["exact"]) < digits(old["exact"]):  # arb's 17 digits: that entry is no longer refined
            assert digits(old["exact"]) == 17
            fewer += 1
    assert fewer == before["engine"]["refined"] - after["engine"]["refined"]
    assert changed > len(before["entries"]) // 2  # the product's ends give most entries more digits
