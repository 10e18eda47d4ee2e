"""A saturated dQ report (issue 30, a kernel author's trial): every exact value lies far below float32's least
subnormal (one key takes a row's weight but for e^-10^5), so its relative errors pass 10^308. The text says
such a figure as its digits times a power of ten (6.97×10^32684) and marks each exact value below the format's
least subnormal, where the best float answer is 0 or that subnormal; the JSON keeps the three digits."""

from __future__ import annotations

import json
from decimal import Decimal

import numpy as np
import pytest

from symattn.kernel import compare
from symattn.kernel.comparison import figure_text


@pytest.fixture(scope="module")
def report():
    """A (1, 1, 4, 4) head of scores about 300² apart: dQ of about 10^-1842 to 10^-32691; the result 0, 10^-6 or
    -0.002 (a kernel's noise)."""
    rng = np.random.default_rng(0)
    q, k = ((300 * rng.standard_normal((1, 1, 4, 4))).astype(np.float32) for _ in range(2))
    v, do = (rng.standard_normal((1, 1, 4, 4)).astype(np.float32) for _ in range(2))
    dq = np.zeros((1, 1, 4, 4), np.float32)
    dq[0, 0, 1], dq[0, 0, 2, 0] = 1e-6, -2e-3
    return compare(dq, q, k, v, kind="dq", dout=do, rule="ulp", max_ulp=4)


# the table's rows: the same in both languages, figures past 10^308 too; the four 7.14e38 in their true order
# (|10^-6 − e| is largest where e is most negative: kernel/ties.py), as is the row-relative figure's place
ROWS = [
    "out[0, 0, 2, 0]  -2.6575242251837431E-1842*   -0.0020000000949949026  1.43e42         7.53×10^1838    4.58×10^1837",
    "out[0, 0, 1, 1]  -5.8056942669060592E-32691*  9.9999999747524271E-7   7.14e38         1.72×10^32684   1.72×10^32684",
    "out[0, 0, 1, 0]  -1.4342883395896778E-32691*  9.9999999747524271E-7   7.14e38         6.97×10^32684   1.72×10^32684",
    "out[0, 0, 1, 3]  2.3840268026258085E-32691*   9.9999999747524271E-7   7.14e38         4.19×10^32684   1.72×10^32684",
    "out[0, 0, 1, 2]  3.7151490008885265E-32691*   9.9999999747524271E-7   7.14e38         2.69×10^32684   1.72×10^32684",
    "out[0, 0, 2, 2]  4.3648045802815593E-1841*    0                       3.11×10^-1796   1.00            1.00",
    "out[0, 0, 2, 3]  3.8440684339544006E-1841*    0                       2.74×10^-1796   1.00            0.881",
    "out[0, 0, 2, 1]  -1.6476335131676437E-1841*   0                       1.18×10^-1796   1.00            0.377",
    "out[0, 0, 0, 3]  9.4848192312155027E-15985*   0                       6.77×10^-15940  1.00            1.00",
    "out[0, 0, 0, 0]  -6.9907232939513262E-15985*  0                       4.99×10^-15940  1.00            0.737",
]

WORST = {
    "en": [
        "Largest relative error: 6.97×10^32684, at out[0, 0, 1, 0].",
        "Largest error relative to its row's largest magnitude: 1.72×10^32684, at out[0, 0, 1, 1].",
        "  batch 0, head 0: 11 of 16 correctly rounded; largest error 1.43e42 ULP at out[0, 0, 2, 0], largest relative 6.97×10^32684",
        "The 10 largest errors:",
        "entry            exact                        result                  ULP             relative        row-relative",
        *ROWS,
        "* The exact value lies below float32's least subnormal, 2^-149 (about 1.4E-45): the nearest float32 to it is 0 or ±2^-149.",
    ],
    "zh": [
        "最大相对误差：6.97×10^32684，在 out[0, 0, 1, 0]。",
        "相对于所在行最大绝对值的最大误差：1.72×10^32684，在 out[0, 0, 1, 1]。",
        "  批次 0，头 0：16 个中有 11 个正确舍入；最大误差 1.43e42 ULP，在 out[0, 0, 2, 0]；最大相对误差 6.97×10^32684",
        "误差最大的 10 个元素：",
        "元素             精确值                       结果                    ULP             相对误差        行相对误差",
        *ROWS,
        "* 精确值小于 float32 的最小次正规数 2^-149（约 1.4E-45）：与之最近的 float32 是 0 或 ±2^-149。",
    ],
}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_text_says_figures_past_float64s_range_as_powers_of_ten_and_marks_values_below_the_least_subnormal(
    report, lang
):
    lines = report.text(lang).splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith(("The 10", "误差最大")))
    assert lines[5:7] + [lines[11]] + lines[start:] == WORST[lang]


def test_the_json_keeps_its_three_digits_and_the_text_writes_them_times_a_power_of_ten(report):
    summary = json.loads(report.to_json())["summary"]
    assert (summary["max_relative"], summary["max_row_relative"]) == ("6.97e32684", "1.72e32684")
    assert WORST["en"][:2] == [
        "Largest relative error: 6.97×10^32684, at out[0, 0, 1, 0].",
        "Largest error relative to its row's largest magnitude: 1.72×10^32684, at out[0, 0, 1, 1].",
    ]


def test_the_figures_past_float64s_range_agree_with_mpmath():
    """The table's relative figures from the exact values it shows (17 digits) and the results, in 50-digit
    mpmath: |result − exact| / |exact|, and the ULP figure of a result 0 (float32's ULP there is 2^-149)."""
    import mpmath

    mpmath.mp.dps = 50
    exact, result = mpmath.mpf("-1.4342883395896778E-32691"), mpmath.mpf(float(np.float32(1e-6)))
    assert mpmath.nstr(abs(result - exact) / abs(exact), 3) == "6.97e+32684"
    exact, result = mpmath.mpf("-2.6575242251837431E-1842"), mpmath.mpf(float(np.float32(-2e-3)))
    assert mpmath.nstr(abs(result - exact) / abs(exact), 3) == "7.53e+1838"
    assert mpmath.nstr(mpmath.mpf("4.3648045802815593E-1841") / mpmath.mpf(2) ** -149, 3) == "3.11e-1796"


def test_an_ordinary_report_has_neither():
    """Values of an ordinary size: the figures and the table as before, no mark and no note."""
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 1, 4, 4)).astype(np.float32) for _ in range(3))
    text = compare(q, q, k, v).text()
    assert "*" not in text and "about" not in text and "subnormal" not in text


@pytest.mark.parametrize(
    ("figure", "text"),
    [
        ("8.10E+40", "8.10e40"),
        ("1.00E+308", "1.00e308"),
        ("9.99E+308", "9.99e308"),
        ("1.00E+309", "1.00×10^309"),
        ("3.84E+188792", "3.84×10^188792"),  # the trial's: its power of ten is the figure's own
        ("1.26E+881512", "1.26×10^881512"),
        ("1.30E-8936", "1.30×10^-8936"),
        ("4.78E-3748800", "4.78×10^-3748800"),  # past the decimal context's exponents
        ("1.00E-308", "1.00e-308"),
        ("9.99E-309", "9.99×10^-309"),
        ("5E+400", "5×10^400"),
        ("0.744", "0.744"),
        ("0", "0"),
    ],
)
def test_a_figure_reads_as_digits_times_a_power_of_ten_only_past_float64s_range(figure, text):
    assert figure_text(Decimal(figure)) == text
