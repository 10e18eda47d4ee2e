"""Deciding every entry (JSON, --all) at kernel sizes, quicker but the same: the float64 bound in pieces of
rows on both cores, the exact rationals skipped where numpy shows they cannot decide (deciding.hopeless),
and the row-relative figures left open narrowed by error-free sums first (rowscale.Tighter). Each against
what it replaces, bit for bit or byte for byte, and the new ends against 50-digit mpmath."""

from __future__ import annotations

import json
from fractions import Fraction

import mpmath
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from symattn.input.floats import FloatResult
from symattn.kernel import compensated, deciding, float64, rowscale
from symattn.kernel import heads as kernel
from symattn.kernel.comparison import _decide
from symattn.kernel.comparison_report import comparison_data
from tests.test_kernel import float_attention, in_format, mp_row


def naive(n: int, d: int, seed: int) -> tuple[float64.Head, FloatResult]:
    """A head of float32 N(0, 1) inputs and the float32 kernel's output, as the .npy reader gives it."""
    rng = np.random.default_rng(seed)
    Q, K, V = (in_format(rng.standard_normal((n, d)), "float32") for _ in range(3))
    x = float_attention(*(M.astype(np.float32) for M in (Q, K, V)))[1]
    return float64.head(Q, K, V, None, None), FloatResult.of_array("r.npy", "float32", in_format(x, "float32"))


def every_entry_json(head: float64.Head, result: FloatResult) -> str:
    return json.dumps(comparison_data(kernel.compare_head([head], result, "output", None)))


def test_every_entry_json_is_the_one_without_the_shortcuts(monkeypatch):
    head, result = naive(256, 64, 0)
    seen: dict[str, int] = {}
    made, hopeless = rowscale.Tighter.__init__, deciding.hopeless

    def counted(self, *args, **kwargs):
        made(self, *args, **kwargs)
        seen["row-relative open"] = int(self.open.sum())

    def spy(*args):
        sure = hopeless(*args)
        seen["hopeless"], seen["asked"] = int(sure.sum()), sure.size
        return sure

    monkeypatch.setattr(rowscale.Tighter, "__init__", counted)
    monkeypatch.setattr(deciding, "hopeless", spy)
    quick = every_entry_json(head, result)
    # the shortcuts were taken (how often depends on the BLAS's last bits: OpenBLAS's Haswell kernels gave
    # 26, 18 of 30, its SkylakeX ones 26, 20 of 32)
    assert seen["row-relative open"] > 0 and 0 < seen["hopeless"] < seen["asked"]

    def none_open(self, *args, **kwargs):
        made(self, *args, **kwargs)
        self.open[:] = False

    monkeypatch.setattr(rowscale.Tighter, "__init__", none_open)
    monkeypatch.setattr(deciding, "hopeless", lambda x, lo, hi, fmt: np.zeros(x.shape, dtype=bool))
    assert every_entry_json(head, result) == quick


def test_every_entry_json_of_a_batch_is_the_one_without_the_shortcuts(monkeypatch):
    # heads side by side, each row's scale its own head's (places.segment): symattn.kernel.compare's JSON
    from symattn.kernel import compare

    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((2, 3, 128, 32)).astype(np.float32) for _ in range(3))
    Z = np.einsum("bhnd,bhmd->bhnm", q, k) / np.float32(np.sqrt(32))
    E = np.exp(Z - Z.max(axis=-1, keepdims=True))
    out = (np.einsum("bhnm,bhmd->bhnd", E, v) / E.sum(axis=-1, keepdims=True)).astype(np.float32)
    seen: list[int] = []
    made = rowscale.Tighter.__init__

    def counted(self, *args, **kwargs):
        made(self, *args, **kwargs)
        seen.append(int(self.open.sum()))

    monkeypatch.setattr(rowscale.Tighter, "__init__", counted)
    quick = compare(out, q, k, v, worst=None).to_json()
    assert seen == [25]

    def none_open(self, *args, **kwargs):
        made(self, *args, **kwargs)
        self.open[:] = False

    monkeypatch.setattr(rowscale.Tighter, "__init__", none_open)
    monkeypatch.setattr(deciding, "hopeless", lambda x, lo, hi, fmt: np.zeros(x.shape, dtype=bool))
    assert compare(out, q, k, v, worst=None).to_json() == quick


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["float16", "bfloat16", "float32", "float64"]),
    st.floats(-12, 6),
    st.floats(-16, -2),
    st.floats(-9, -1),
    st.floats(-1, 1),
    st.integers(0, 2**32 - 1),
)
def test_hopeless_only_where_the_exact_rationals_decide_nothing(fmt, size, width, off, shift, seed):
    rng = np.random.default_rng(seed)
    size = min(size, 3.0) if fmt == "float16" else size  # float16 ends at 65504
    exact = rng.choice([-1, 1], 64) * 10.0 ** (size + rng.uniform(0, 1, 64))
    x = in_format(exact * (1 + rng.choice([-1, 1], 64) * 10.0**off * rng.uniform(0, 1, 64)), fmt)
    half = np.abs(exact) * 10.0**width
    lo, hi = exact - half * (1 + shift), exact + half * (1 - shift)
    for i in np.nonzero(deciding.hopeless(x, lo, hi, fmt))[0]:
        assert _decide(Fraction(float(x[i])), Fraction(float(lo[i])), Fraction(float(hi[i])), fmt) is None, i


def test_hopeless_catches_the_intervals_too_wide_for_three_digits():
    rng = np.random.default_rng(5)
    exact = rng.standard_normal(4000) * 10.0 ** rng.integers(-6, 4, 4000)
    x = in_format(exact + exact * 10.0 ** rng.uniform(-9, -5, 4000) * rng.choice([-1, 1], 4000), "float32")
    half = np.abs(exact) * 10.0 ** rng.uniform(-12, -8, 4000)
    lo, hi = exact - half, exact + half
    sure = deciding.hopeless(x, lo, hi, "float32")
    none = np.array(
        [
            _decide(Fraction(float(a)), Fraction(float(b)), Fraction(float(c)), "float32") is None
            for a, b, c in zip(x, lo, hi)
        ]
    )
    assert (int(sure.sum()), int(none.sum())) == (2202, 2259)
    assert not (sure & ~none).any()


def test_row_pieces_give_the_whole_pass_bit_for_bit(monkeypatch):
    # 1024 × 1024 × 16 is PARALLEL_WORK: two processes, pieces of 512 rows, each block as in one pass
    head, _ = naive(1024, 16, 2)
    pieces: list[str] = []
    forked = kernel.map_forked

    def spy(function, data, parts, parallel=True):
        pieces.append(f"{function.__name__} {len(parts)} {parallel}")
        return forked(function, data, parts, parallel)

    monkeypatch.setattr(kernel, "map_forked", spy)
    (lo, hi), whole = kernel._all_intervals([head], "output")[0], kernel.intervals(head, "output")
    assert pieces == ["_rows_piece 2 True"]
    assert np.array_equal(lo, whole[0]) and np.array_equal(hi, whole[1])
    part = kernel.intervals(head, "output", (256, 768))
    assert np.array_equal(part[0], whole[0][256:768]) and np.array_equal(part[1], whole[1][256:768])


def test_pairs_in_the_same_rows_leave_the_others_bit_for_bit():
    # the stages are made of the rows asked for (BLAS's sums depend on their count): more columns of the
    # same rows give every pair asked for before the same value and bound
    head, _ = naive(600, 32, 3)
    pairs = [(i, (7 * i) % 32) for i in range(0, 600, 3)]
    more = [(i, (7 * i + 5) % 32) for i in range(0, 600, 9)]
    value, error = compensated.outputs(head, pairs)
    again, bound = compensated.outputs(head, pairs + more)
    assert np.array_equal(value, again[: len(pairs)]) and np.array_equal(error, bound[: len(pairs)])
    key_by_key = np.arange(len(pairs + more)) >= len(pairs)  # the bound formed key by key for ``more`` only
    again, tight = compensated.outputs(head, pairs + more, per_key=key_by_key)
    assert np.array_equal(value, again[: len(pairs)]) and np.array_equal(error, tight[: len(pairs)])
    assert (tight[len(pairs) :] <= bound[len(pairs) :]).all() and (tight < bound).sum() == 67


def test_tighter_ends_hold_the_exact_outputs_against_mpmath():
    head, result = naive(40, 8, 4)
    lo, hi = kernel.intervals(head, "output")
    tighter = rowscale.Tighter(result, lo, hi, np.ones(lo.shape, dtype=bool))
    tighter.open[:] = False
    tighter.open[::3, ::2] = True  # any entries: the ends are the error-free sums'
    also, apart = tighter.pairs([(0, 1), (3, 5)], 0, 8)
    assert (also[:2], apart[:2], len(also), len(apart)) == ([(0, 0), (0, 2)], [(6, 0), (6, 2)], 8, 48)
    tighter.meet(also, 0, *compensated.outputs(head, also))
    tighter.meet(apart, 0, *compensated.outputs(head, apart, per_key=np.ones(len(apart), dtype=bool)))
    a, b = tighter.ends(lo, hi)
    assert np.array_equal(a[~tighter.open], lo[~tighter.open]) and np.array_equal(b[~tighter.open], hi[~tighter.open])
    assert (a[tighter.open] >= lo[tighter.open]).all() and (b[tighter.open] <= hi[tighter.open]).all()
    assert ((b - a)[tighter.open] < (hi - lo)[tighter.open]).sum() == 56  # every one narrower
    with mpmath.workdps(60):
        for i in range(0, 40, 3):
            exact = mp_row(head.Q, head.K, head.V, i)[1]
            for j in range(0, 8, 2):
                assert mpmath.mpf(float(a[i, j])) <= exact[j] <= mpmath.mpf(float(b[i, j])), (i, j)
