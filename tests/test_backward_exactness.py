"""Which gradients are exact, decided cheaply (issue 19 §5): entries ruled out by their value at the limit
weights, the rest decided by the exponential polynomials; past BACKWARD_CLOSED_FORMS, compute writes
each entry's exact rational or ≈ and its digits."""

from __future__ import annotations

import json
import time
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings

from symattn.checking.checker import check
from symattn.cli.commands import main
from symattn.derivation.intermediates import compute
from symattn.exact import candidates
from symattn.exact.exactness import Exps, rational
from symattn.exact.factory import build
from symattn.exact.gradients import gradients
from symattn.input import limits
from symattn.input.spec import load_spec

from .test_backward import multihead_inputs, sdpa_inputs
from .test_layout import rows

# 8 tokens × 4 dimensions (896 terms: past the closed forms' limit); the first query is 0, so its row of
# weights is uniform, and its dZ, dS and dQ rows are rational (the scale 1/√4 is too)
MID = {"Q": [["0"] * 4] + rows(7, 4, 3), "K": rows(8, 4, 5), "V": rows(8, 2, 2), "backward": {"loss": "sum"}}


def test_a_mid_size_compute_shows_the_rational_entries_exactly_and_the_others_with_approx():
    out = compute(load_spec(MID), digits=6)["backward"]
    assert out["dZ"]["exact"][:2] == [
        ["-63/320", "-7/320", "49/320", "-47/320", "9/320", "13/64", "-31/320", "5/64"],
        [
            "≈-0.257495",
            "≈0.00157433",
            "≈0.175687",
            "≈-0.152922",
            "≈0.0457690",
            "≈0.188203",
            "≈-0.0758137",
            "≈0.0749984",
        ],
    ]
    assert out["dZ"]["value"][0][:2] == ["-0.196875", "-0.0218750"]  # -63/320, -7/320
    assert out["dS"]["exact"][0][:3] == ["-63/640", "-7/640", "49/640"]  # the scale 1/√4 is rational
    assert out["dQ"]["exact"][:2] == [
        ["363/1280", "-351/6400", "-997/6400", "-11/256"],
        ["≈0.305484", "≈-0.0402108", "≈-0.154940", "≈-0.0844124"],
    ]
    assert out["dV"]["exact"][:2] == [["≈1.14897", "≈1.14897"], ["≈0.876576", "≈0.876576"]]
    assert out["dK"]["exact"][0] == ["≈0.199432", "≈0.136579", "≈0.0219769", "≈-0.203448"]
    assert out["dA"]["exact"][0][:3] == ["-8/5", "-1/5", "6/5"]
    assert out["dO"]["exact"][0] == ["1", "1"]
    for name in ("dV", "dZ", "dQ", "dK"):  # ≈ carries the digits of value
        for shown, value in zip(sum(out[name]["exact"], []), sum(out[name]["value"], [])):
            assert shown == "≈" + value or not shown.startswith("≈")


def test_the_compute_json_writes_approx_as_itself(capsys, tmp_path):
    path = tmp_path / "mid.json"
    path.write_text(json.dumps(MID), encoding="utf-8")
    assert main(["compute", str(path), "--digits", "6"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith('  "backward"'))
    assert '"dQ": {"exact": [["363/1280", "-351/6400", "-997/6400", "-11/256"], ["≈0.305484", ' in line


def test_no_exact_leaves_the_exact_strings_out():
    out = compute(load_spec(MID), digits=6, exact=False)["backward"]
    assert set(out["dQ"]) == {"value"}


def test_small_specs_keep_their_closed_forms():
    spec = load_spec({**MID, "Q": MID["Q"][:4], "K": MID["K"][:4], "V": MID["V"][:4]})  # 4·4·10 terms
    out = compute(spec, digits=6)["backward"]
    assert out["dZ"]["exact"][0] == ["-23/80", "1/16", "33/80", "-3/16"]
    assert out["dZ"]["exact"][1][0].startswith("(-8/5 - 6*exp(21/200)/(5*(exp(-3/25) + ")  # SymPy's closed form


def test_closed_forms_past_the_limit_are_refused_in_one_line(tmp_path, capsys):
    raw = {"Q": rows(16, 8, 3), "K": rows(17, 8, 5), "V": rows(17, 8, 2), "key_tokens": [f"k{j}" for j in range(17)]}
    model = build(load_spec({**raw, "backward": {"loss": "sum"}}))
    assert model.terms == 16 * 17 * (17 + 8 + 8) > limits.BACKWARD_FORMS
    assert model.exact("weights").shape == (16, 17)  # the forward closed forms are not gradients
    path = tmp_path / "claims.json"
    path.write_text(json.dumps({**raw, "claims": {"dQ[1][1]": "0.1"}}), encoding="utf-8")
    assert main(["check", str(path), "--backward"]) == 2
    assert capsys.readouterr().err == (
        f"symattn: {path}: backward: the closed forms of the gradients of 16×17 scores hold 8976 terms; at "
        "most 8192 (the limit); compute --backward gives every gradient entry, as its exact rational or with ≈\n"
    )


def test_a_mid_size_check_of_gradient_claims_still_shows_closed_forms():
    claims = check(MID, {"claims": {"dQ[1][1]": "0.2836", "dQ[2][1]": "0.3055"}}, backward=True)
    closed = [str(c.closed_form) for c in claims.results]
    assert closed[0] == "363/1280" and closed[1].startswith("-(-1/5 - 8*exp(-3/40)/(5*(exp(-39/200) + ")


def test_32_tokens_with_16_dimensions_decide_without_the_exponential_polynomials(monkeypatch):
    # the bench's spec: every entry that a weight goes into is ruled out by its limit and its enclosure
    raw = {"Q": rows(32, 16, 3), "K": rows(32, 16, 5), "V": rows(32, 16, 2), "backward": {"loss": "sum"}}
    model = build(load_spec(raw))
    monkeypatch.setattr(candidates, "evaluate", lambda *a: pytest.fail("evaluated"))
    start = time.process_time()
    exact = {name: model.rationals(name) for name in ("dO", "dA", "dV", "dZ", "dQ", "dK")}
    assert time.process_time() - start < 10  # under a second on a quiet machine; minutes before
    assert exact["dA"][0][:2] == (Fraction(-9, 5), Fraction(9, 5))
    assert all(x is None for name in ("dV", "dZ", "dQ", "dK") for row in exact[name] for x in row)


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def decided_in_full(model) -> dict[str, list[list[Fraction | None]]]:
    """Every entry decided by the exponential polynomials alone (the way before the limits)."""
    alg = Exps(model.scale)
    grids = gradients(alg, model.inputs, [alg.weights(h) for h in model.heads])
    return {name: [[rational(x) for x in row] for row in m] for name, m in grids.items()}


def same_decisions(raw):
    model = build(load_spec(raw))
    full = decided_in_full(model)
    for name, table in full.items():
        assert [list(row) for row in model.rationals(name)] == table, name


@SETTINGS
@given(sdpa_inputs())
def test_the_limits_decide_as_the_exponential_polynomials_do(raw):
    same_decisions(raw)


@settings(SETTINGS, max_examples=50)  # each example is several heads' exact backward: the suite's costliest
@given(multihead_inputs())
def test_the_limits_decide_as_the_exponential_polynomials_do_with_heads_and_projections(raw):
    same_decisions(raw)


@pytest.mark.parametrize(
    "raw",
    [
        # identical queries with opposite dO: dV and dK cancel to exactly 0 across rows
        {"Q": [[1, 0], [1, 0]], "K": [[1, 0], [0, 1]], "V": [[1], [2]], "backward": {"grad_output": [[1], [-1]]}},
        # equal scores in a row, a mask, and the squared error
        {
            "Q": [[0, 0], [1, 2], [1, 1]],
            "K": [[1, 2], [2, 1], [0, 3]],
            "V": [[1, 0], [0, 1], [2, 2]],
            "mask": "causal",
            "backward": {"loss": "mse", "target": [[1, 0], [0, 1], [1, 1]]},
        },
        # an irrational scale (1/√2) with a flat row
        {"Q": [[0, 0], [1, 0]], "K": [[1, 2], [3, 4]], "V": [[1], [3]], "backward": {"loss": "sum"}},
    ],
)
def test_hand_made_cases_decide_as_the_exponential_polynomials_do(raw):
    same_decisions(raw)
