"""Issue 30's float64 exps below the floor T = z − M < −700, where E = 0: TINY = 2^-1000 (e^-693.147) bounds
the true e^t only where t's interval [T − eT, T + eT] stays below ln TINY. eT is a priori, so one key can
carry a large one while the row's maximum keeps a tiny one; every enclosure is checked against mpmath at 50
digits."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest

from symattn.kernel import compare, compensated, float64, logsumexp
from symattn.testing import assert_attention_close

mpmath.mp.dps = 50
Q = np.array([[1.0, 0.0]])
V = np.array([[0.0], [1.0]])
# key 1 scores −702 exactly, but its 2^77 where q is 0 gives the split's a-priori rest c·γ_2·2·2^-25·2·2^78
WIDE = np.array([[0.0, 0.0], [-702.0, 2.0**77]])
NARROW = np.array([[0.0, 0.0], [-702.0, 0.0]])


class _Coarse:
    """A score modifier whose float path is coarse: exactly, it adds ``shift`` to key 1's score; its float
    path leaves the score as it is and widens that score's bound by ``widen`` ≥ |shift|, a true bound."""

    def __init__(self, shift: float, widen: float):
        self.shift, self.widen = shift, widen

    def float64(self, Z: np.ndarray, eZ: np.ndarray, rows: object) -> tuple[np.ndarray, np.ndarray]:
        eZ = eZ.copy()
        eZ[:, 1] += self.widen
        return Z, eZ


def _stage(K: np.ndarray, mods: tuple = ()):
    head = float64.head(Q, K, V, Fraction(1), None, mods=mods)
    assert head is not None
    return head, next(float64.blocks(head, stages=True))


def _inside(value: float, error: float, exact: mpmath.mpf) -> bool:
    lo, hi = float64.interval(np.array(value), np.array(error))
    return mpmath.mpf(float(lo)) <= exact <= mpmath.mpf(float(hi))


def _exact(t: mpmath.mpf) -> tuple[mpmath.mpf, mpmath.mpf, mpmath.mpf]:
    """(weight of key 0, weight of key 1 = the output, log-sum-exp) of the row with key 1 at z − M = t."""
    e = mpmath.exp(t)
    return 1 / (1 + e), e / (1 + e), mpmath.log1p(e)


def _holds(head, block, t: mpmath.mpf) -> None:
    w0, w1, lse = _exact(t)
    assert _inside(block.weights[0, 0], block.weights_error[0, 0], w0)
    assert _inside(block.weights[0, 1], block.weights_error[0, 1], w1)
    assert _inside(block.output[0, 0], block.output_error[0, 0], w1)
    value, error = logsumexp.lse(block)
    assert _inside(value[0], error[0], lse)
    for per_key in (None, np.array([True])):
        O, eO = compensated.stage_outputs(head, block.stage, np.array([0]), np.array([0]), per_key)
        assert _inside(O[0], eO[0], w1)
    O, eO = compensated.product_outputs(head, block.stage, np.abs(V))
    assert _inside(O[0, 0], eO[0, 0], w1)


def test_a_key_large_where_the_query_is_zero_has_no_bound_below_the_floor():
    """T = −702 with eT = 12.0048 (a key of 2^77 where q is 0), beside the row's maximum with eT 4.7e-16:
    t may be −690, e^-690 > TINY. The old bound of key 1 was TINY all the same: its weight 0 within
    9.33e-302 (true here, as the exact t is −702, but nothing in the proof said so); now none."""
    head, block = _stage(WIDE)
    Z, eZ = float64.scaled(head, slice(0, 1), float64.Split.of(WIDE))
    assert (Z[0, 1], eZ[0, 1]) == (-702.0, 12.003600360012474)
    E, eE, eps, under, M = block.stage[:5]
    assert E.tolist() == [[1.0, 0.0]] and M.tolist() == [[0.0]] and under.tolist() == [[False, False]]
    assert eE[0, 0] == 4.680666233738027e-16 and eE[0, 1] == np.inf and eps[0, 1] == np.inf
    assert block.weights_error.tolist() == [[np.inf, np.inf]] and block.output_error[0, 0] == np.inf
    _holds(head, block, mpmath.mpf(-702))


def test_a_true_score_above_ln_tiny_is_no_longer_bounded_by_tiny():
    """A modifier whose float score is −702 within 11, the exact one −691.5: e^-691.5 = 4.846e-301, 5.19 TINY.
    The old code gave key 1's weight 0 within 9.334e-302 and the compensated output (per key) 0 within
    9.335e-302, both below the true 4.846e-301; now both have no bound, and every enclosure holds."""
    t = mpmath.mpf(-702) + mpmath.mpf(10.5)
    head, block = _stage(NARROW, (_Coarse(10.5, 11.0),))
    _holds(head, block, t)
    assert float(_exact(t)[1]) == 4.845803105269879e-301 and _exact(t)[1] > 5 * mpmath.mpf(float64.TINY)
    assert block.stage[3].tolist() == [[False, False]] and block.stage[1][0, 1] == np.inf
    assert block.weights_error[0, 1] == np.inf and logsumexp.lse(block)[1][0] == np.inf
    O, eO = compensated.stage_outputs(head, block.stage, np.array([0]), np.array([0]), np.array([True]))
    assert (O[0], eO[0]) == (0.0, np.inf)


@pytest.mark.parametrize("widen", [0.0, 3.0, 7.9])
def test_tiny_stays_where_the_interval_stays_below_ln_tiny(widen: float):
    """T = −702 within eT ≤ 7.9: T + eT ≤ −694.1 < ln TINY, so TINY still bounds key 1 (bytes as before)."""
    mods = (_Coarse(widen, widen),) if widen else ()
    head, block = _stage(NARROW, mods)
    E, eE, _, under = block.stage[:4]
    assert under.tolist() == [[False, True]] and E[0, 1] == 0.0 and eE[0, 1] == float64.TINY
    assert block.weights_error[0, 1] == 9.333569448650702e-302
    _holds(head, block, mpmath.mpf(-702) + mpmath.mpf(widen))


def test_one_above_the_threshold_has_no_bound():
    """eT = 8.1: T + eT = −693.9, below ln TINY, but fl(T + eT) is not below −694: no bound, as the proof
    asks for a margin past ln TINY's −693.147 that the test's own rounding cannot cross."""
    _, block = _stage(NARROW, (_Coarse(0.0, 8.1),))
    assert block.stage[3].tolist() == [[False, False]] and block.stage[1][0, 1] == np.inf


def _tensors():
    q = Q.astype(np.float32).reshape(1, 1, 1, 2)
    return q, WIDE.astype(np.float32).reshape(1, 1, 2, 2), V.astype(np.float32).reshape(1, 1, 2, 1)


def test_compare_finds_the_exact_output_and_lse_of_the_row():
    """Through compare, the row without a float64 bound is refined: the exact output e^-702/(1 + e^-702) and
    log-sum-exp log(1 + e^-702), both 1.3343621176711151e-305, pass within 1 ULP; 0 for either fails."""
    q, k, v = _tensors()
    _, output, lse = _exact(mpmath.mpf(-702))
    assert float(output) == float(lse) == 1.3343621176711151e-305
    out = np.array(float(output)).reshape(1, 1, 1, 1)
    assert compare(out, q, k, v, scale=1.0, max_ulp=1).ok
    assert not compare(np.zeros((1, 1, 1, 1)), q, k, v, scale=1.0, max_ulp=1).ok
    assert compare(np.array(float(lse)).reshape(1, 1, 1), q, k, v, scale=1.0, kind="lse", max_ulp=1).ok
    assert not compare(np.zeros((1, 1, 1)), q, k, v, scale=1.0, kind="lse", max_ulp=1).ok
    assert assert_attention_close(out, q, k, v, scale=1.0, max_ulp=1).ok
    with pytest.raises(AssertionError) as caught:
        assert_attention_close(np.zeros((1, 1, 1, 1)), q, k, v, scale=1.0, max_ulp=1)
    assert str(caught.value).split("\n")[0] == (
        "fails max_ulp=1: 1 of 1 entries exceed it; the largest error is 5.27e15 ULP at out[0, 0, 0, 0] "
        "(out 0, exact 1.33436212E-305)"
    )
