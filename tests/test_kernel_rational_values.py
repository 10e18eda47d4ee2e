"""Rational outputs and LSEs on the float64 path (a helper's attack, session 13): an exact value that is a
rational on a float, or on a rounding tie, is never decided by narrowing balls; Lindemann–Weierstrass proves it.
An output is rational iff the mean of its V column over each group of keys of equal score is the same (then it
is that mean); an LSE in base e iff its query attends one key (at a rational scale), in base 2 iff it attends
2^k keys of score 0. Before, each of these was "not decided at 1000 digits", exit 2, on a correct kernel."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from symattn.cli.commands import main
from symattn.kernel import zeros

K = [[1, 0], [0, 1], [1, 1]]
V = [[1, 2], [3, 3], [5, 4]]  # query [1, 0] scores keys 0 and 2 alike: their means (3, 3) are key 1's


def write(folder, q, k, v, result) -> None:
    for name, a in (("q", q), ("k", k), ("v", v), ("r", result)):
        np.save(folder / f"{name}.npy", np.asarray(a, dtype=np.float32))
    (folder / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')


def compare(folder, capsys, *args: str) -> dict:
    code = main(["compare", str(folder / "s.toml"), str(folder / "r.npy"), "--format", "json", *args])
    captured = capsys.readouterr()
    assert (code, captured.err) == (0, "")
    return json.loads(captured.out)


def test_the_mean_of_each_group_of_equal_scores_is_the_output_where_they_agree():
    inputs = zeros.of_arrays(np.array([[1.0, 0.0]]), np.array(K, float), np.array(V, float))
    assert zeros.rational_output(inputs, 0, 0) == zeros.rational_output(inputs, 0, 1) == Fraction(3)
    other = zeros.of_arrays(np.array([[1.0, 0.0]]), np.array(K, float), np.array([[1, 2], [3, 3], [6, 4]], float))
    assert zeros.rational_output(other, 0, 0) is None  # means 3.5 and 3: e^z's weights make it transcendental
    assert zeros.rational_output(other, 0, 1) == Fraction(3)


def test_an_output_on_a_float_is_0_ulp_and_one_next_to_it_1_ulp(tmp_path, capsys):
    write(tmp_path, [[1, 0]], K, V, [[3.0, np.nextafter(np.float32(3), np.float32(4))]])
    data = compare(tmp_path, capsys)
    assert [(e["exact"], e["ulps"]) for e in data["entries"]] == [
        ("3.0000000000000000", "0"),
        ("3.0000000000000000", "1.00"),
    ]


def test_a_log_sum_exp_of_one_key_is_its_score_at_a_rational_scale(tmp_path, capsys):
    """d = 4: the scale 1/√4 = 1/2 is rational, so L = e^(1/2) and log L = 1/2 exactly."""
    write(tmp_path, [[1, 0, 0, 0]], [[1, 0, 0, 0]], [[1]], [0.5])
    data = compare(tmp_path, capsys, "--quantity", "lse")
    assert [(e["exact"], e["ulps"]) for e in data["entries"]] == [("0.50000000000000000", "0")]


def test_a_base_2_log_sum_exp_of_four_keys_of_score_0_is_2(tmp_path, capsys):
    write(tmp_path, [[1, 0]], [[0, 1], [0, 2], [0, -1], [0, 5]], [[1], [2], [3], [4]], [2.0])
    data = compare(tmp_path, capsys, "--quantity", "lse", "--lse-base", "2")
    assert [(e["exact"], e["ulps"]) for e in data["entries"]] == [("2.0000000000000000", "0")]


def test_torchs_sdpa_on_keys_of_equal_means_passes_the_ulp_rule():
    torch = pytest.importorskip("torch")
    from symattn.testing import assert_attention_close

    q = torch.tensor([[[[1.0, 0.0]]]])
    k = torch.tensor([[[[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]]])
    v = torch.tensor([[[[1.0], [2.0], [3.0]]]])  # keys 0 and 2: mean 2, key 1's 2: the output is 2
    out = torch.tensor([[[[2.0]]]])
    report = assert_attention_close(out, q, k, v, rule="ulp", max_ulp=0)
    assert (report.ok, report.worst_place, report.figure()) == (True, "out[0, 0, 0, 0]", "0 ULP")


def test_a_float_as_integers_times_a_power_of_two_is_exact():
    """rational_rows.integers: each value is its integer times 2^shift, exactly (zeros, signs, subnormals of
    float32 and float64, 2^±100 apart in one array); the all-ones head's rows then agree exactly."""
    from symattn.kernel import rational_rows

    x = np.array([[0.0, -0.0, 1.5, -(2.0**-149)], [2.0**100, -(2.0**-100) / 3, 5e-324, 0.1]])
    ints, shift = rational_rows.integers(x)
    assert [[Fraction(int(a)) * Fraction(2) ** shift for a in row] for row in ints.tolist()] == [
        [Fraction(v) for v in row] for row in x.tolist()
    ]
    assert rational_rows.integers(np.zeros(3))[1] == 0  # no nonzero value: no shift


def test_an_all_ones_batch_is_exactly_one_everywhere():
    """torch.ones-style inputs: every row's scores are equal, every output exactly 1 (0 ULP at every place)."""
    from symattn.kernel import compare as compare_tensors

    q = np.ones((2, 12, 4, 8), np.float32)
    report = compare_tensors(q, q, q, q, layout="bnhd", rule="ulp", max_ulp=0)
    data = json.loads(report.to_json())
    assert (report.ok, data["summary"]["entries"], data["summary"]["correctly_rounded"]) == (True, 768, 768)
