"""symattn compare: a float result against the exact values, in ULPs, decided digit by digit."""

import json
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symattn.cli.commands import main
from symattn.input import builtin
from symattn.input.errors import LimitError, ShapeError, SpecError
from symattn.input.floats import read_result, ulp
from symattn.input.spec import load_spec
from symattn.kernel.spec_comparison import compare, comparison_data

np = pytest.importorskip("numpy")
SEED = builtin.example_path("seed", "en")
# the seed's exact output, from its closed form, to 17 significant digits (as symattn compute prints it)
EXACT = [
    ["4.5334478644787376", "2.5695718798943505"],
    ["2.8882336413574332", "4.8722427184502641"],
    ["4.3835785136956441", "2.7600456274426432"],
]


def test_ulp_of_each_format():
    # at a power of two the spacing below it (Kahan's): the float just below 1 is 1 ULP from 1, not 0.5
    assert ulp(Fraction(1), "float64") == Fraction(1, 2**53)
    assert ulp(Fraction(1) + Fraction(1, 2**60), "float64") == Fraction(1, 2**52)  # just above: the binade's own
    assert ulp(Fraction(3, 2), "float32") == Fraction(1, 2**23)
    assert ulp(Fraction(1) - Fraction(1, 2**60), "float32") == Fraction(1, 2**24)  # just below a power of two
    assert ulp(Fraction(1), "float16") == Fraction(1, 2048) and ulp(Fraction(1), "bfloat16") == Fraction(1, 256)
    assert ulp(Fraction(1, 2**14), "float16") == Fraction(1, 2**24)  # the least normal: below it, the subnormals'
    assert ulp(Fraction(0), "float16") == Fraction(1, 2**24)  # the smallest subnormal
    assert ulp(Fraction(1, 2**30), "float16") == Fraction(1, 2**24)  # subnormal range: a fixed spacing


def save(path, array):
    np.save(path, array)
    return path


def test_float32_result_exact_errors(tmp_path):
    """Each float's error, checked against an independent exact computation: (x − exact) / spacing, by hand."""
    values = np.array(
        [
            [4.5334482192993164, 2.5695719718933105],
            [2.8882336616516113, 4.8722429275512695],
            [4.3835783004760742, 2.7600455284118652],
        ],
        dtype=np.float32,
    )
    c = compare(load_spec(SEED), read_result(save(tmp_path / "o.npy", values)))
    assert [str(e.exact) for e in c.entries] == [x for row in EXACT for x in row]
    assert [str(e.ulps) for e in c.entries] == ["0.744", "0.386", "0.0851", "0.439", "0.447", "0.415"]
    # 0.744: |4.5334482192993164 − 4.53344786447873...| = 3.548e-7, and the float32 spacing at 4.5 is 2^-21
    assert round((4.5334482192993164 - 4.5334478644787376) * 2**21, 3) == 0.744
    assert (c.correctly_rounded, c.worst.row, c.worst.col) == (5, 0, 0)
    assert c.histogram == ((1, 5), (2, 1))
    data = comparison_data(c)
    assert data["summary"] == {
        "entries": 6,
        "correctly_rounded": 5,
        "max_ulps": "0.744",
        "max_ulps_at": {"query": 0, "column": 0},
        "max_relative": "7.83e-8",
        "max_relative_at": {"query": 0, "column": 0},
        "max_row_relative": "7.83e-8",
        "max_row_relative_at": {"query": 0, "column": 0},
        "histogram": [{"ulps": "(0, 0.5]", "count": 5}, {"ulps": "(0.5, 1]", "count": 1}],
    }
    assert data["places"] == "0-based, as numpy indexes: o[query, column]"
    # |x − exact| / (the row's largest |exact|): row 0's is 4.5334…, so o[0, 1] gives 9.19999e-8 / 4.53345
    assert [str(e.row_relative) for e in c.entries] == [
        "7.83E-8",
        "2.03E-8",
        "4.17E-9",
        "4.29E-8",
        "4.86E-8",
        "2.26E-8",
    ]


@pytest.mark.parametrize("fmt", ["float16", "float32", "float64"])
def test_planted_errors_of_known_ulps(tmp_path, fmt):
    """Exact outputs 3/2 and 5/4 (flat rows: every weight 1/2), moved by k ULPs: reported as exactly k."""
    spec = {"Q": [["0"], ["0"]], "K": [["1"], ["2"]], "V": [["1", "1"], ["2", "1.5"]]}
    exact = [[Fraction(3, 2), Fraction(5, 4)], [Fraction(3, 2), Fraction(5, 4)]]
    planted = [[0, 1], [3, -7]]
    values = np.array(
        [[float(exact[i][j] + planted[i][j] * ulp(exact[i][j], fmt)) for j in range(2)] for i in range(2)]
    ).astype(fmt)
    c = compare(spec, read_result(save(tmp_path / "p.npy", values)))
    assert [e.ulps for e in c.entries] == [0, Decimal("1.00"), Decimal("3.00"), Decimal("7.00")]
    assert [e.bucket for e in c.entries] == [0, 2, 4, 5]  # 0, (0.5, 1], (2, 4], (4, 8]
    assert c.correctly_rounded == 1 and (c.worst.row, c.worst.col) == (1, 1)


def test_layouts_of_npy(tmp_path):
    """Fortran order, big-endian, a batch and head of one, float16: the same numbers."""
    base = np.array([[4.5, 2.5], [2.875, 4.875], [4.375, 2.75]])
    reference = read_result(save(tmp_path / "a.npy", base)).rows
    for name, array in (
        ("f.npy", np.asfortranarray(base)),
        ("b.npy", base.astype(">f8")),
        ("h.npy", base[None, None]),
        ("p.npy", base.astype(np.float16)),
    ):
        assert read_result(save(tmp_path / name, array)).rows == reference
    assert read_result(tmp_path / "p.npy").format == "float16"


def test_torch_float64_attention_is_within_a_few_ulps(tmp_path):
    torch = pytest.importorskip("torch")
    spec = load_spec(SEED)

    def t(m):
        return torch.tensor([[float(x.value) for x in row] for row in m], dtype=torch.float64)[None]

    out = torch.nn.functional.scaled_dot_product_attention(t(spec.Q), t(spec.K), t(spec.V))[0]
    c = compare(spec, read_result(save(tmp_path / "o.npy", out.numpy())))
    assert c.format == "float64" and all(e.bucket <= 3 for e in c.entries)  # at most 2 ULP


def test_json_results_and_weights(tmp_path):
    path = tmp_path / "a.json"
    path.write_text(json.dumps([["0.41654", "0.26142", "0.32204"]]).replace('"', ""), encoding="utf-8")
    with pytest.raises(ShapeError) as info:
        compare(load_spec(SEED), read_result(path), "weights")
    assert str(info.value) == f"{path}: shape: the result is 1×3 and the exact weights is 3×3"
    rows = "[[0.4165, 0.2614, 0.3221], [0.2741, 0.4436, 0.2823], [0.4030, 0.2573, 0.3397]]"
    path.write_text(rows, encoding="utf-8")
    c = compare(load_spec(SEED), read_result(path), "weights")
    assert c.format == "float64" and c.entries[0].value == Fraction(0.4165)  # json.load's float, exactly
    with pytest.raises(SpecError) as info:
        read_result(path, "float16")
    assert str(info.value) == (
        f"{path}: result[1][1]: 0.4165 is not a float16 value: --dtype float16 needs every value to be one (the "
        "file holds decimals)"
    )


def test_a_json_number_is_the_float64_nearest_it(tmp_path):
    """As json.load reads it, ties to even: json.dump's shortest repr is the kernel's float again."""
    path = tmp_path / "r.json"
    x = 4.3835785136956433  # a float64 whose shortest repr, 4.383578513695643, lies 0.27 ULP below it
    path.write_text(json.dumps([[x, 0.1, 1e-400]]), encoding="utf-8")
    assert read_result(path).rows == ((Fraction(x), Fraction(0.1), Fraction(0)),)
    # 1 + 2^-53, halfway between 1 and the next float64, goes to 1 (the even one); a little more, to the next
    path.write_text("[[1.00000000000000011102230246251565404236316680908203125, 1.000000000000000112]]")
    assert read_result(path).rows == ((1, 1 + Fraction(1, 2**52)),)
    path.write_text("[[0.0999755859375, 65504]]", encoding="utf-8")  # float16 values, written out
    assert read_result(path, "float16").rows == ((Fraction(0.0999755859375), 65504),)


def test_not_finite_entries_and_exit_codes(tmp_path, capsys):
    values = np.array(
        [
            [4.5334478644787376, np.nan],
            [2.8882336413574332, 4.8722427184502641],
            [4.3835785136956441, 2.7600456274426432],
        ]
    )
    path = save(tmp_path / "n.npy", values)
    assert main(["compare", str(SEED), str(path)]) == 1
    out = capsys.readouterr().out
    assert "Places are 0-based, as numpy indexes: o[query, column].\n" in out
    assert "Not finite at o[0, 1]: nan." in out and "5 of 5 entries are correctly rounded" not in out
    good = save(tmp_path / "g.npy", np.array([[float(x) for x in row] for row in EXACT]))
    assert main(["compare", str(SEED), str(good), "--max-ulp", "0.5"]) == 0
    assert "6 of 6 entries are correctly rounded (error at most 0.5 ULP)." in capsys.readouterr().out


@pytest.mark.parametrize(
    "content, message",
    [
        (b"\x93NUMPY\x01\x00\x10\x00{'descr': '<i4'}", "a .npy header numpy cannot read (\"{'descr': '<i4'}\")"),
        (
            b"\x93NUMPY\x01\x00\x3c\x00{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }    ",
            "descr: expected a float16, bfloat16, float32 or float64 array",
        ),
        (b"[[1, 2], [3]]", "rows of different lengths"),
        (b'[[1, "x"]]', "result[1][2]: not a number: 'x'"),
        (b"{}", "expected a JSON array of rows of numbers"),
    ],
)
def test_bad_results(tmp_path, content, message):
    path = tmp_path / "r.json"
    path.write_bytes(content)
    with pytest.raises(SpecError) as info:
        read_result(path)
    assert str(info.value).startswith(f"{path}: {message}")


@pytest.mark.parametrize(
    "content, message",
    [
        (b"[[1e9999, 1]]", "result[1][1]: 1e9999 is beyond float64's range (at most about 1.8e308)"),
        (b"[[1, -17976931348623159e292]]", "result[1][2]: -17976931348623159e292 is beyond float64's range"),
        (b"\x93NUMPY\x01\x00", "a truncated .npy file: 8 bytes, the preamble alone takes 10"),
        (b"\x93NUM", "a truncated .npy file: 4 bytes, the preamble alone takes 10"),
        (b"\x93NUMPY\x01\x00\x76\x00{'descr'", "a truncated .npy file: 18 bytes, the preamble and header take 128"),
        (b"\x93NUMPZ\x01\x00", "not a .npy file (no \\x93NUMPY magic)"),
    ],
)
def test_results_that_crashed_are_one_line(tmp_path, capsys, content, message):
    """Issue 28: a JSON number past float64 (OverflowError) and a .npy file cut short (said to have no magic)."""
    name = "r.json" if content.startswith(b"[") else "r.npy"
    path = tmp_path / name
    path.write_bytes(content)
    assert main(["compare", str(SEED), str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"symattn: {path}: {message}") and err.count("\n") == 1


def test_truncated_npy(tmp_path):
    path = save(tmp_path / "t.npy", np.zeros((3, 2)))
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(SpecError) as info:
        read_result(path)
    assert str(info.value) == f"{path}: shape: 40 bytes of data for 3×2 float64 (48 expected)"


def test_result_size_limit(tmp_path, monkeypatch):
    import symattn.input.limits

    monkeypatch.setattr(symattn.input.limits, "RESULT_BYTES", 100)
    path = save(tmp_path / "big.npy", np.zeros((8, 8)))
    with pytest.raises(LimitError) as info:
        read_result(path)
    assert str(info.value) == f"{path}: larger than 0 MiB"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.integers(-20, 20), min_size=12, max_size=12), st.sampled_from(["float16", "float32"]))
def test_errors_agree_with_mpmath(tmp_path, entries, fmt):
    """Every shown ULP error is the correctly rounded error of an independent 60-digit computation."""
    import mpmath

    q, k, v = entries[:4], entries[4:8], entries[8:]
    Q, K, V = ([[x / 10 for x in m[:2]], [x / 10 for x in m[2:]]] for m in (q, k, v))
    spec = {
        "Q": [[str(x) for x in r] for r in Q],
        "K": [[str(x) for x in r] for r in K],
        "V": [[str(x) for x in r] for r in V],
    }
    mpmath.mp.dps = 60
    exact = []
    for i in range(2):
        z = [
            sum(mpmath.mpf(spec["Q"][i][d]) * mpmath.mpf(spec["K"][j][d]) for d in range(2)) / mpmath.sqrt(2)
            for j in range(2)
        ]
        w = [mpmath.exp(x) / sum(mpmath.exp(y) for y in z) for x in z]
        exact.append([sum(w[j] * mpmath.mpf(spec["V"][j][c]) for j in range(2)) for c in range(2)])
    values = np.array([[float(x) for x in row] for row in exact]).astype(fmt)
    c = compare(spec, read_result(save(tmp_path / "x.npy", values)))
    from symattn.exact.numeric import significant_exact

    for e in c.entries:
        x = mpmath.mpf(e.value.numerator) / e.value.denominator
        u = ulp(Fraction(mpmath.nstr(exact[e.row][e.col], 50)), fmt)
        err = abs(x - exact[e.row][e.col]) / (mpmath.mpf(u.numerator) / u.denominator)
        if err < mpmath.mpf(10) ** -40:  # exact here (a rational output); only mpmath's own rounding is left
            assert e.ulps == 0
            continue
        assert e.ulps == significant_exact(Fraction(mpmath.nstr(err, 40)), 3)
