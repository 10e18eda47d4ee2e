"""Issue 30's float64 forward pass where its values underflow: output sums of weights near e^-700 times small
values, weights below 2^-1022 on rows of 65,536 keys, and the log-sum-exp of scores that underflow. Each
enclosure is checked against mpmath at 50 digits."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np

from symattn.kernel import compensated, float64, logsumexp

mpmath.mp.dps = 50
V_SMALL = 8.737875871794452e-19  # a float32: e^-699 (as exp_bounded gives it) times it is 0.48 subnormal ulps past one


def _one_row(keys: list[float], values: list[float], scale: Fraction | None = None, q: float = 1.0):
    """float64's head of one query row q against scalar keys and values (d = 1: z = c·q·k, c = 1 by default)."""
    K, V = np.array(keys).reshape(-1, 1), np.array(values).reshape(-1, 1)
    head = float64.head(np.array([[q]]), K, V, scale, None)
    return head, next(float64.blocks(head, stages=True))


def _inside(value: float, error: float, exact: mpmath.mpf) -> bool:
    lo, hi = float64.interval(np.array(value), np.array(error))
    return mpmath.mpf(float(lo)) <= exact <= mpmath.mpf(float(hi))


def _sums_head():
    """One key at z − M = 0 with v = 0, a hundred at −699 with v = V_SMALL: each product e·v rounds down in the
    subnormals, 0.48 of 2^-1074, and the output is their sum."""
    head, block = _one_row([0.0] + [-699.0] * 100, [0.0] + [V_SMALL] * 100)
    e = mpmath.exp(-699)
    return head, block, 100 * e * mpmath.mpf(V_SMALL) / (1 + 100 * e), mpmath.log(1 + 100 * e)


def test_outputs_summed_from_subnormal_products_keep_their_bound():
    """The relative bound of N = Σ e·v was 0 here, beside O = 2.322e-320 against 2.342e-320 exactly."""
    _, block, exact, _ = _sums_head()
    assert float(exact) == 2.342e-320 and block.output[0, 0] == 2.322e-320
    assert block.output_error[0, 0] == 8.063e-321  # SAFETY² · 101 · 2^-1070, and O's own 2^-1070
    assert _inside(block.output[0, 0], block.output_error[0, 0], exact)


def test_the_compensated_sums_of_subnormal_products_keep_their_bound():
    head, block, exact, _ = _sums_head()
    for per_key in (None, np.array([True])):
        O, eO = compensated.stage_outputs(head, block.stage, np.array([0]), np.array([0]), per_key)
        assert (O[0], eO[0]) == (2.322e-320, 8.063e-321)
        assert _inside(O[0], eO[0], exact)
    assert compensated.outputs(head, [(0, 0)]) == (np.array([2.322e-320]), np.array([8.063e-321]))


def test_subnormal_weights_of_a_row_of_65536_keys_keep_their_bound():
    """e^-699 / 65,536: below 2^-1022, where the division rounds to 2^-1074, not u relative."""
    _, block = _one_row([0.0] * 65536 + [-699.0], [1.0] * 65537)
    exact = mpmath.exp(-699) / (65536 + mpmath.exp(-699))
    A, eA = block.weights[0, 65536], block.weights_error[0, 65536]
    assert 0 < A < 2.0**-1022 and float(exact) == A == 4.089565976468824e-309
    assert eA == 2.223e-321
    assert _inside(A, eA, exact)
    assert _inside(block.weights[0, 0], block.weights_error[0, 0], 1 / (65536 + mpmath.exp(-699)))


def test_the_log_sum_exp_of_tiny_weights_and_underflowed_scores_is_enclosed():
    """LSE's bound holds at least e_ℓ/ℓ ≥ u absolute (ℓ ≥ 1), so no underflow escapes it: the row above, and
    scores c·q·k = 2^-1098 that underflow to 0 (lse = 2^-1098 with one key, log(1 + e^(2^-1098)) with two)."""
    _, block, _, exact = _sums_head()
    value, error = logsumexp.lse(block)
    assert value[0] == 0.0 and _inside(value[0], error[0], exact)
    t = 2.0**-149
    for keys, want in (([t], mpmath.mpf(2) ** -1098), ([t, 0.0], mpmath.log(1 + mpmath.exp(mpmath.mpf(2) ** -1098)))):
        _, block = _one_row(keys, [0.0] * len(keys), Fraction(1, 2**800), q=t)
        value, error = logsumexp.lse(block)
        assert _inside(value[0], error[0], want)
