"""A batch's text report decides only what it shows (issue 30, "Speed"): each (batch, head)'s summary, the ten
largest errors, the maxima; the figures, places and bytes are those of the report that decides every entry,
which the same comparison makes when anything else is read (its JSON, another entry)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symattn.kernel import compare
from symattn.kernel import heads as kernel
from symattn.kernel.report import Report
from tests.test_kernel import in_format


def batch(seed: int, b: int, h: int, kv: int, n: int, d: int, causal: bool) -> tuple[np.ndarray, ...]:
    """float32 q, k, v of (b, h, n, d) (k, v with kv heads) and their float32 attention, errors planted."""
    rng = np.random.default_rng(seed)
    q = in_format(rng.standard_normal((b, h, n, d)), "float32")
    k, v = (in_format(rng.standard_normal((b, kv, n, d)), "float32") for _ in range(2))
    rep = np.repeat(np.arange(kv), h // kv)
    Z = np.einsum("bhid,bhjd->bhij", q.astype(np.float32), k[:, rep].astype(np.float32)) / np.float32(np.sqrt(d))
    if causal:
        Z = np.where(np.tril(np.ones((n, n), dtype=bool)), Z, -np.inf)
    E = np.exp(Z - Z.max(axis=-1, keepdims=True))
    out = (np.einsum("bhij,bhjd->bhid", E, v[:, rep].astype(np.float32)) / E.sum(axis=-1, keepdims=True)).astype(
        np.float64
    )
    at = tuple(rng.integers(0, s, 4) for s in out.shape)
    out[at] = in_format(out[at] * (1 + 2.0**-11), "float32")  # a few heads with a worst of their own
    out[0, 0, 0, 1] = out[0, 0, 0, 0]  # equal figures: ties broken in row order
    if seed % 3 == 0:
        out[-1, -1, -1, -1] = np.nan  # not finite: its exact value shown all the same
    return out, q, k, v


def reports(arrays: tuple[np.ndarray, ...], causal: bool, lean_first: bool) -> tuple[Report, Report]:
    """The text report's comparison (worst 10) and the one of every entry (worst None), on lean's bound first
    or float64's."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(kernel, "LEAN_WORK", 0 if lean_first else 2**62)
        shown = compare(*arrays, causal=causal)
        every = compare(*arrays, causal=causal, worst=None)
    return shown, every


def texts(r: Report, every: Report) -> tuple[str, str]:
    """Both texts of ten entries; the engine line counts the entries arb decided, for what each decided."""
    old = Report(every.comparison, listed=10).text()
    new = r.text()
    engine = [line for line in old.splitlines() if line.startswith("Decided by float64")]
    if engine:  # the text report refines only the entries it may show: at most as many
        assert r.comparison.refined is not None and every.comparison.refined is not None
        assert r.comparison.refined <= every.comparison.refined
        mine = [line for line in new.splitlines() if line.startswith("Decided by float64")]
        new = new.replace(mine[0], engine[0])
    return new, old


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from([(1, 2, 2), (2, 2, 1), (2, 4, 2)]),
    st.integers(3, 12),
    st.sampled_from([2, 4, 8]),
    st.booleans(),
    st.booleans(),
)
def test_a_batchs_text_report_is_the_report_of_every_entry(seed, axes, n, d, causal, lean_first):
    arrays = batch(seed, *axes, n, d, causal)
    shown, every = reports(arrays, causal, lean_first)
    new, old = texts(shown, every)
    assert new == old
    assert shown.comparison.entries.known is not None  # only what the text shows was decided first
    summaries = [
        (s["worst"], s["worst_relative"], s["correctly_rounded"])
        for s in shown.comparison.entries.head_summaries(shown.comparison.where)
    ]
    full = [
        (s["worst"], s["worst_relative"], s["correctly_rounded"])
        for s in every.comparison.entries.head_summaries(every.comparison.where)
    ]
    assert summaries == full
    assert shown.to_json() == every.to_json()  # the JSON decides every entry, as before
    assert shown.to_json(summary=True) == every.to_json(summary=True)


def test_reading_an_entry_the_text_left_open_decides_every_entry(monkeypatch):
    arrays = batch(4, 2, 2, 2, 6, 4, False)
    monkeypatch.setattr(kernel, "LEAN_WORK", 0)
    shown, every = compare(*arrays), compare(*arrays, worst=None)
    table = shown.comparison.entries
    open_ = np.argwhere(~table.known)
    assert open_.size  # the text left some open
    i, j = (int(v) for v in open_[0])
    assert table.entry(i, j) == every.comparison.entries.entry(i, j)
    assert table.ranked(24) == every.comparison.entries.ranked(24)
    assert list(table) == list(every.comparison.entries)


def partition_rule(x, exact_float, e, worst):
    """kernel._needed as it was: the worst-th largest bucket and ULPs found by np.partition."""
    usable = e.bucket_ok & exact_float
    need = np.isfinite(x) & ~usable
    at = np.flatnonzero(usable)
    if at.size > worst:
        b, low = e.bucket.ravel()[at], e.ulps_lo.ravel()[at]
        top_b = np.partition(b, -worst)[-worst]
        rest = worst - int(np.count_nonzero(b > top_b))
        top = np.partition(low[b == top_b], -rest)[-rest]
        below = (e.bucket < top_b) | ((e.bucket == top_b) & (e.ulps_hi < top * kernel.BELOW))
        need |= usable & ~below
    else:
        need |= usable
    if exact_float.any():
        top = np.max(np.where(exact_float, e.relative_lo, 0.0))
        need |= exact_float & ~(e.relative_hi < top * kernel.BELOW)
    return need


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 40),
    st.integers(1, 12),
    st.sampled_from([1, 2, 3, 10, 11, 50]),
    st.floats(0, 1),
)
def test_the_entries_a_report_may_show_are_those_the_partition_rule_found(seed, rows, cols, worst, open_share):
    """heads._needed counts the buckets (a few small integers) to find the worst-th largest where it used
    np.partition over every entry (0.16 s of a batch's 1.5 s): the same entries, ties and open ones included."""
    from symattn.kernel.deciding import Errors

    rng = np.random.default_rng(seed)
    shape = (rows, cols)
    # few buckets, the higher ones rarer (so the worst-th largest often lies below the top one), and ties in
    # bucket and in ULPs common
    bucket = np.minimum(rng.geometric(rng.uniform(0.3, 0.95), shape) - 1, 5)
    ulps_lo = rng.integers(0, 6, shape).astype(np.float64) * 0.5
    relative_lo = rng.random(shape)  # the largest relative error's rule adds those near its top only
    e = Errors(
        rng.random(shape) > 0.1,
        ulps_lo,
        ulps_lo + rng.integers(0, 3, shape) * 0.5,
        relative_lo,
        relative_lo * (1 + rng.random(shape) * 0.1),
        bucket,
        rng.random(shape) > open_share,
        rng.random(shape) > 0.9,
    )
    x = np.where(rng.random(shape) > 0.05, 1.0, np.nan)
    exact_float = np.isfinite(x) & (rng.random(shape) > 0.05)
    assert (kernel._needed(x, exact_float, e, worst) == partition_rule(x, exact_float, e, worst)).all()
