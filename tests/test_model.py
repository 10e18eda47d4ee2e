"""Exact values of the worked example, including where the document slips."""

from decimal import Decimal
from fractions import Fraction

import sympy
from sympy import Rational, exp, sqrt

from symattn.derivation.derive import derive
from symattn.exact.head_figures import exact_figures, hand_figures
from symattn.exact.heads import build_model
from symattn.exact.multihead import build_multihead
from symattn.input.spec import load_spec


def D(*xs):
    return tuple(Decimal(x) for x in xs)


def shown(rows):
    return tuple(tuple(str(x.value) for x in row) for row in rows)


def test_scores_are_exact_rationals(seed):
    m = build_model(load_spec(seed))
    assert m.scores == sympy.Matrix(
        [
            [1, Rational(1, 10), Rational(4, 5)],
            [Rational(1, 5), 1, Rational(3, 10)],
            [Rational(23, 25), Rational(19, 100), Rational(3, 4)],
        ]
    )


def test_scaled_keeps_sqrt2(seed):
    m = build_model(load_spec(seed))
    assert m.scale == sqrt(2) / 2
    assert m.scaled[2, 0] == Rational(23, 50) * sqrt(2)


def test_weights_closed_form(seed):
    m = build_model(load_spec(seed))
    z = [Rational(23, 50) * sqrt(2), Rational(19, 200) * sqrt(2), Rational(3, 8) * sqrt(2)]
    assert m.weights[2, 0] == exp(z[0]) / (exp(z[0]) + exp(z[1]) + exp(z[2]))


def test_document_numbers_steps_1_to_4(seed):
    fig = exact_figures(build_model(load_spec(seed)), load_spec(seed).decimals)
    assert str(fig.sqrt_dk.value) == "1.414"
    assert shown(fig.scores) == (("1.00", "0.10", "0.80"), ("0.20", "1.00", "0.30"), ("0.92", "0.19", "0.75"))
    assert all(x.exact for row in fig.scores for x in row)
    # the document truncates 0.6505… to 0.650; rounded half-up it is 0.651
    assert shown(fig.scaled) == (("0.707", "0.071", "0.566"), ("0.141", "0.707", "0.212"), ("0.651", "0.134", "0.530"))
    assert shown(fig.exp)[2] == ("1.917", "1.144", "1.699")
    assert str(fig.exp_sum[2].value) == "4.760"
    assert shown(fig.weights)[2] == ("0.403", "0.240", "0.357")
    assert shown(fig.percent)[2] == ("40.3", "24.0", "35.7")
    assert shown(fig.output)[2] == ("4.384", "2.760")


def test_step5_rows_are_computed_not_illustrative(seed):
    fig = exact_figures(build_model(load_spec(seed)), load_spec(seed).decimals)
    # the document's "illustrative" A has [0.40, 0.21, 0.39] and [0.24, 0.43, 0.33]
    assert shown(fig.weights) == (("0.417", "0.221", "0.362"), ("0.261", "0.459", "0.280"), ("0.403", "0.240", "0.357"))


def test_hand_mode_reproduces_the_documents_chain(seed):
    spec = load_spec({**seed, "rounding": "hand"})
    fig = hand_figures(build_model(spec), spec)
    assert str(fig.sqrt_dk.value) == "1.414"
    assert shown(fig.scaled)[2] == ("0.651", "0.134", "0.530")  # 0.92 / 1.414 = 0.65063…
    assert shown(fig.exp)[2] == ("1.917", "1.143", "1.699")
    assert str(fig.exp_sum[2].value) == "4.759" and fig.exp_sum[2].exact
    assert shown(fig.weights)[2] == ("0.403", "0.240", "0.357")
    assert shown(fig.products[2]) == (("4.030", "0.000"), ("0.000", "2.400"), ("0.357", "0.357"))
    assert shown(fig.output)[2] == ("4.387", "2.757")
    assert all(x.exact for x in fig.output[2])


def test_rational_output_tie_is_rounded_exactly():
    # every V row equal: the output is exactly 0.5 whatever the weights; 0 decimals -> 1 (half-up)
    spec = load_spec({"Q": [[1, 2], [3, 4]], "K": [[1, 0], [0, 1]], "V": [["0.5"], ["0.5"]], "decimals": {"output": 0}})
    m = build_model(spec)
    assert m.rationals("output") == ((Fraction(1, 2),), (Fraction(1, 2),))
    assert m.rounded("output", 0) == (D("1"), D("1"))


def test_an_output_projection_of_zeros_gives_exact_values():
    # irrational weights times a column of W_O that is all 0: the output is b_O exactly, not an undecidable tie
    base = {"X": [[1, 0], [0, 1]], "W_Q": [[1, 0], [0, 1]], "W_K": [[1, 0], [0, 1]], "W_V": [[1, 0], [0, 1]]}
    spec = load_spec(base | {"W_O": [[0, 1], [0, 0]], "b_O": ["0.25", 0]})
    m = build_multihead(spec)
    assert m.rationals("output")[0] == (Fraction(1, 4), None)
    assert m.rounded("output", 2)[0] == D("0.25", "0.67")
    assert build_multihead(load_spec(base | {"W_O": [[0, 0], [0, 0]]})).rounded("output", 3) == (D("0", "0"),) * 2


def test_equal_scores_give_exact_weights():
    spec = load_spec({"Q": [[1], [1], [1]], "K": [[2], [2], [2]], "V": [[1], [2], [4]]})
    m = build_model(spec)
    assert m.weights.tolist() == [[Rational(1, 3)] * 3] * 3
    assert m.rounded("weights", 2) == (D("0.33", "0.33", "0.33"),) * 3
    assert m.rounded("output", 3) == (D("2.333"),) * 3


def test_recap_and_top(seed):
    d = derive(load_spec(seed))
    softmax = d.steps[3]
    assert softmax.rows[0].top == (0,)
    recap = next(s for s in d.steps if s.kind == "recap")
    assert (recap.top, str(recap.score.value), str(recap.percent.value)) == (0, "0.92", "40")


def test_compute_prints_exactly_as_sympy_str(seed):
    from symattn.derivation.intermediates import compute

    spec = load_spec({**seed, "mask": "causal"})
    data = compute(spec, digits=5)
    model = build_model(spec)
    for quantity in ("scores", "scaled", "exp"):
        matrix = model.exact(quantity)
        assert data[quantity]["exact"] == [[str(x) for x in matrix.row(i)] for i in range(matrix.rows)]
    assert data["exp_sum"]["exact"] == [str(x) for x in model.exp_sum]
    # weights name their row's sum (s_1, …): written in, they are str() of the closed forms
    sums = data["exp_sum"]["exact"]
    assert [
        [x.replace(f"s_{i + 1}", f"({sums[i]})") for x in row] for i, row in enumerate(data["weights"]["exact"])
    ] == [[str(x) for x in model.weights.row(i)] for i in range(3)]
    assert data["weights"]["exact"][0] == ["1", "0", "0"]  # causal: the first query sees itself only
    assert data["scaled"]["value"][0] == ["0.70711", "-inf", "-inf"]


def test_weights_from_exps_made_a_few_rows_at_a_time_are_the_same(monkeypatch):
    """Past boxes.LARGE scores the weights make their exps ROWS_AT_ONCE rows at a time and keep none (issue
    28's memory): the same boxes, and the same digits, as from the kept exps."""
    from symattn.exact import boxes

    rows = [[str((i * 7 + j * 3) % 19 / 10 - 0.9) for j in range(3)] for i in range(5)]
    spec = load_spec({"Q": rows, "K": rows, "V": rows, "mask": "causal"})
    kept = build_model(spec)
    kept_boxes = boxes.Boxes(kept, 64)
    expected, digits = kept_boxes.weights(), kept.significant("weights", 15)
    assert "_exp_shifted" in kept_boxes.__dict__
    monkeypatch.setattr(boxes, "LARGE", 0)
    monkeypatch.setattr(boxes, "ROWS_AT_ONCE", 2)
    chunked = build_model(spec)
    chunked_boxes = boxes.Boxes(chunked, 64)
    assert chunked_boxes.weights() == expected and "_exp_shifted" not in chunked_boxes.__dict__
    assert chunked.significant("weights", 15) == digits
