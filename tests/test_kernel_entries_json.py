"""compare's JSON writes the list of every entry from the entry arrays (kernel/entries_json.py): the same bytes
as json.dumps of the entries' dicts, for every kind of entry and place."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from symattn.input.decimals import significant_exact
from symattn.kernel import compare
from symattn.kernel.comparison import EXACT_DIGITS
from symattn.kernel.entries_json import float_text


@settings(max_examples=500, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_a_float_is_written_as_significant_exact_writes_it(x):
    assert float_text(x) == str(significant_exact(Fraction(x), EXACT_DIGITS))


def test_float_text_pads_and_rounds_half_up():
    assert float_text(0.5) == "0.50000000000000000"
    assert float_text(-0.0) == "0"
    assert float_text(2.0**60) == "1.1529215046068470E+18"
    assert float_text(0.1) == "0.10000000000000001"


def attention(q, k, v):
    z = q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return (e @ v.astype(np.float64)) / e.sum(axis=-1, keepdims=True)


def test_the_entries_are_the_bytes_json_dumps_gives():
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 2, 5, 4)).astype(np.float32) for _ in range(3))
    v[..., 1] = 0  # an exact zero: a kernel that misses it has an absolute error
    out = attention(q, k, v).astype(np.float32)
    out[0, 1, 2, 1] = 1e-7
    out[1, 0, 3, 2] = np.nan
    report = compare(out, q, k, v, worst=None)
    data = report.data()
    missed = [e for e in data["entries"] if "absolute" in e]
    assert [(e["batch"], e["head"], e["query"], e["column"], e["absolute"]) for e in missed] == [
        (0, 1, 2, 1, "1.00e-7")
    ]
    assert [e["value"] for e in data["entries"] if e["value"] is None] == [None]
    assert report.to_json() == json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def test_a_matrix_result_and_the_summary_are_the_bytes_json_dumps_gives():
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((6, 3)).astype(np.float16) for _ in range(3))
    out = attention(q, k, v).astype(np.float16)
    report = compare(out, q, k, v, worst=None)
    assert report.to_json() == json.dumps(report.data(), ensure_ascii=False, indent=2) + "\n"
    assert report.to_json(summary=True) == json.dumps(report.data(True), ensure_ascii=False, indent=2) + "\n"
