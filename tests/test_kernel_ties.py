"""Figures that are the same to the three digits shown (issue 30, a kernel author's trial): the worst place
is the entry of the truly largest error, the same in every line of a report that gives that figure, and a
list of the largest errors takes the truly largest ones; entries whose figures are exactly equal are said to
be one of N places. A (1, 1, 4, 4) head of scores about 300² apart: every exact dQ lies far below float32's
least subnormal (about 10^-1841 to 10^-36269), so each error's ULP is 2^-149 and |result − exact| is the
result itself to hundreds of digits: the figures are the results times 2^149, checked in 50-digit mpmath."""

from __future__ import annotations

import json

import mpmath
import numpy as np
import pytest

from symattn.kernel import compare
from symattn.testing import assert_attention_close
from tests.test_compare_layouts import compare as run_compare
from tests.test_compare_layouts import write


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(0)
    q, k = ((300 * rng.standard_normal((1, 1, 4, 4))).astype(np.float32) for _ in range(2))
    v, do = (rng.standard_normal((1, 1, 4, 4)).astype(np.float32) for _ in range(2))
    return q, k, v, do


def ulps(x: float) -> str:
    """|x − e| / 2^-149 for a float32 x and an exact e below 10^-1800, to five digits: x·2^149."""
    mpmath.mp.dps = 50
    return mpmath.nstr(mpmath.mpf(float(np.float32(x))) * mpmath.mpf(2) ** 149, 5)


def test_the_worst_place_is_the_larger_of_two_errors_that_show_alike(inputs):
    """The trial's dK: 9.3047e-4 (first in row order) and 9.3114e-4 are both 6.64e41 ULP; the larger is named."""
    q, k, v, do = inputs
    dq = np.zeros((1, 1, 4, 4), np.float32)
    dq[0, 0, 0, 0], dq[0, 0, 2, 1] = 9.3047e-4, 9.3114e-4
    assert (ulps(9.3047e-4), ulps(9.3114e-4)) == ("6.6401e+41", "6.6448e+41")
    r = compare(dq, q, k, v, kind="dq", dout=do)
    lines = r.text().splitlines()
    assert lines[4] == "Largest error: 6.64e41 ULP, at out[0, 0, 2, 1]."
    assert lines[lines.index("Each (batch, head):") + 1] == (
        "  batch 0, head 0: 14 of 16 correctly rounded; largest error 6.64e41 ULP at out[0, 0, 2, 1], largest "
        "relative 1.33×10^15981"
    )
    table = lines[lines.index("The 10 largest errors:") + 2 :]
    assert [line[:16] for line in table[:2]] == ["out[0, 0, 2, 1] ", "out[0, 0, 0, 0] "]  # the larger first
    assert r.text("zh").splitlines()[4] == "最大误差：6.64e41 ULP，在 out[0, 0, 2, 1]。"
    summary = json.loads(r.to_json())["summary"]
    assert (summary["max_ulps"], summary["max_ulps_at"]) == (
        "6.64e41",
        {"batch": 0, "head": 0, "query": 2, "column": 1},
    )
    assert "max_ulps_places" not in summary  # told apart: one place
    with pytest.raises(AssertionError) as failed:
        assert_attention_close(dq, q, k, v, kind="dq", dout=do)
    said = str(failed.value).splitlines()  # its allclose line and its report name the same place
    assert said[0].endswith("= 93.1 at out[0, 0, 2, 1] (out 0.000931139977, exact -1.64763351E-1841)")
    assert "Largest error: 6.64e41 ULP, at out[0, 0, 2, 1]." in said
    assert "The worst entry is out[0, 0, 2, 1], where |out − exact| / (atol + rtol·|exact|) = 93.1." in said


def test_a_list_of_the_largest_errors_takes_the_larger_of_a_tie_at_its_end(inputs, tmp_path, capsys):
    """The trial's dQ table: its 10th and 11th largest show 3.57e41 alike; the 10th listed is the larger (the
    later in row order), by the API and by the CLI, which decides only the entries it shows."""
    q, k, v, do = inputs
    dq = np.zeros((1, 1, 4, 4), np.float32)
    dq.flat[:9] = [2e-3 - 1e-4 * n for n in range(9)]  # nine distinct larger errors
    dq[0, 0, 2, 1], dq[0, 0, 3, 0] = 5.0001e-4, 5.0003e-4
    assert (ulps(5.0001e-4), ulps(5.0003e-4)) == ("3.5682e+41", "3.5683e+41")
    spec = write(tmp_path, ['Q = "q.npy"', 'K = "k.npy"', 'V = "v.npy"'], q=q, k=k, v=v, do=do, dq=dq)
    code, out, err = run_compare(
        capsys, spec, tmp_path / "dq.npy", "--quantity", "dq", "--grad-output", tmp_path / "do.npy"
    )
    assert (code, err) == (0, "")
    tenth = (
        "[0, 0, 3, 0]  -8.0739012671805284E-36269*  0.00050003000069409609  3.57e41        6.19×10^36264  1.78×10^36264"
    )
    for symbol, text in (("dq", out), ("out", compare(dq, q, k, v, kind="dq", dout=do).text())):
        table = text.splitlines()[-12:-1]  # its head and ten rows, before the note on subnormals
        assert [row.split("[")[0] for row in table[1:]] == [symbol] * 10
        assert table[-1].replace(" ", "") == (symbol + tenth).replace(" ", "")  # the columns' widths are the symbol's
        assert f"{symbol}[0, 0, 2, 1]" not in text


@pytest.mark.parametrize(
    ("lang", "relative", "row"),
    [
        (
            "en",
            "Largest relative error: 1.00, at out[0, 0, 0, 0] (one of 16 places).",
            "Largest error relative to its row's largest magnitude: 1.00, at out[0, 0, 0, 3] (one of 4 places).",
        ),
        (
            "zh",
            "最大相对误差：1.00，在 out[0, 0, 0, 0]（16 处之一）。",
            "相对于所在行最大绝对值的最大误差：1.00，在 out[0, 0, 0, 3]（4 处之一）。",
        ),
    ],
)
def test_figures_equal_exactly_are_one_of_n_places(inputs, lang, relative, row):
    """A result of 0 everywhere: each entry is off by exactly 1 relative (|0 − e| / |e|), and each row's largest
    magnitude by exactly 1 of it: 16 places and 4 (a row each), the first in row order named."""
    q, k, v, do = inputs
    r = compare(np.zeros((1, 1, 4, 4), np.float32), q, k, v, kind="dq", dout=do)
    assert r.text(lang).splitlines()[5:7] == [relative, row]
    data = json.loads(r.to_json())
    summary = data["summary"]
    assert (summary["max_relative"], summary["max_relative_places"]) == ("1.00", 16)
    assert (summary["max_row_relative"], summary["max_row_relative_places"]) == ("1.00", 4)
    assert summary["max_row_relative_at"] == {"batch": 0, "head": 0, "query": 0, "column": 3}
    assert "max_ulps_places" not in summary


def test_arb_orders_a_tie_that_the_levels_before_it_leave_as_they_were():
    """The float64 path's levels below arb (its sums again, two floats) may give an entry the ends it has
    already; its levels of rising precision are tried all the same (a (1, 8, 130, 128) float32 head named
    the first of two places where 0.4999825 and 0.4999838 ULP both show 0.500)."""
    from fractions import Fraction
    from types import SimpleNamespace

    from symattn.kernel.ties import order

    ulp = Fraction(1, 2**23)  # float32's at 1

    def ends(points, level):  # the same ends at levels 0 and 1 (overlapping), narrower from level 2
        width = Fraction(1, 2**40) if level < 2 else Fraction(1, 2**60)
        centre = {(0, 0): 1 + Fraction(4999825, 10**7) * ulp, (0, 1): 1 + Fraction(4999838, 10**7) * ulp}
        return {p: (centre[p] - width, centre[p] + width) for p in points}

    enclosure = SimpleNamespace(levels=3, first_arb=2, deviations={}, tie_orders={}, at=ends)
    comparison = SimpleNamespace(enclose=lambda: enclosure, format="float32")
    x = [SimpleNamespace(row=0, col=j, value=Fraction(1)) for j in (0, 1)]  # both show 0.500 ULP
    assert [[(e.row, e.col) for e in group] for group in order(comparison, "ulps", x)] == [[(0, 1)], [(0, 0)]]
