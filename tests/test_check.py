"""The checker on the worked example's own numbers, bad claims files, and properties."""

import json
import shutil
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from symattn.checking.checker import check
from symattn.checking.report import report_data
from symattn.cli.commands import main
from symattn.exact import numeric
from symattn.exact.heads import build_model
from symattn.input import builtin
from symattn.input.decimals import round_half_up
from symattn.input.errors import SpecError
from symattn.input.spec import load_spec

from .strategies import specs

SEED_CLAIMS = builtin.example_path("seed-claims", "zh")


def verdicts(report):
    return {(v.claim.quantity, v.row_label, v.col_label, v.claim.number.text): v.verdict for v in report.results}


def test_the_documents_numbers():
    report = check(None, str(SEED_CLAIMS))
    got = verdicts(report)
    # steps 1 to 4: all exact, rounded or carried, except the truncated scaled score
    early = {k: v for k, v in got.items() if k[0] in ("sqrt_dk", "scores", "scaled", "exp", "exp_sum")}
    assert {k: v for k, v in early.items() if v not in ("exact", "rounded", "carried")} == {
        ("scaled", "它", "小猫", "0.650"): "last-digit"
    }
    truncated = [v for v in report.results if v.truncated]
    assert [(v.claim.quantity, v.row_label, v.col_label) for v in truncated] == [("scaled", "它", "小猫")]
    assert got[("exp", "它", "小猫", "1.916")] == "carried"  # e^0.650 of their own truncated z
    assert got[("exp_sum", "它", None, "4.758")] == "carried"
    # the output 4.387 / 2.757 follows from their weights; the exact value rounds to 4.384 / 2.760
    assert got[("output", "它", 1, "4.387")] == "carried"
    assert got[("output", "它", 2, "2.757")] == "carried"
    assert got[("output", "它", 1, "4.39")] == "carried"  # rounds their own 4.387
    # step 5's "illustrative" rows 1 and 2 are wrong, but 0.21 is one unit off 0.22
    assert [got[("weights", "小猫", k, x)] for k, x in (("小猫", "0.40"), ("吃", "0.21"), ("它", "0.39"))] == [
        "wrong",
        "last-digit",
        "wrong",
    ]
    assert [got[("weights", "吃", k, x)] for k, x in (("小猫", "0.24"), ("吃", "0.43"), ("它", "0.33"))] == [
        "wrong"
    ] * 3
    assert [got[("weights", "它", k, x)] for k, x in (("小猫", "0.40"), ("吃", "0.24"), ("它", "0.36"))] == [
        "rounded"
    ] * 3
    assert dict(report.counts) == {"exact": 9, "rounded": 20, "carried": 6, "last-digit": 2, "wrong": 5}
    first = report.first_problem
    assert (first.claim.quantity, first.row_label, first.col_label, str(first.expected)) == (
        "scaled",
        "它",
        "小猫",
        "0.651",
    )


def test_json_keys_and_values():
    data = report_data(check(None, str(SEED_CLAIMS)))
    first = data["claims"][16]
    assert first == {
        "quantity": "scaled",
        "row": "它",
        "col": "小猫",
        "claimed": "0.650",
        "exact": "23*sqrt(2)/50",
        "value": "0.650538",
        "verdict": "last-digit",
        "truncated": True,
        "expected": "0.651",
        "carried": "0.651",
        "key": "claims.scaled",
        "diagnosis": None,
        "head": None,
        "note": None,
        "asked": None,
        "rounded_inputs": [],
    }
    assert data["summary"]["first_wrong"] == first
    assert data["summary"]["counts"] == {"exact": 9, "rounded": 20, "carried": 6, "last-digit": 2, "wrong": 5}


@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("fmt, ext", [("text", "txt"), ("markdown", "md"), ("latex", "tex")])
def test_report_golden(golden, lang, fmt, ext, capsys):
    code = main(["check", "--example", "--lang", lang, "--format", fmt] + (["--standalone"] if fmt == "latex" else []))
    out, err = capsys.readouterr()
    assert (code, err) == (1, "")
    golden(f"seed-claims.{lang}.{ext}", out)


def test_check_exit_codes(tmp_path, capsys):
    good = tmp_path / "good.toml"
    good.write_text(
        'Q = [[1, 0]]\nK = [[1, 0]]\nV = [[2, 3]]\n[claims]\nweights = [[1]]\noutput = [["2.0", 3]]\n', encoding="utf-8"
    )
    assert main(["check", str(good)]) == 0
    assert "exact: 3" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text('Q = [[1, 0]]\nK = [[1, 0]]\nV = [[2, 3]]\n[claims]\nweights = [["0.9"]]\n', encoding="utf-8")
    assert main(["check", str(bad)]) == 1


def test_spec_by_path_and_api(tmp_path):
    (tmp_path / "s.toml").write_text(builtin.example_text("seed", "en"), encoding="utf-8")
    claims = tmp_path / "c.json"
    claims.write_text(
        json.dumps({"spec": "s.toml", "claims": {"weights[3][1]": 0.403, "rows": {"2": {"exp_sum": 4.42}}}})
    )
    report = check(None, str(claims))
    assert [(v.claim.key, v.verdict) for v in report.results] == [
        ("claims.rows.2.exp_sum", "rounded"),
        ("claims.weights[3][1]", "rounded"),
    ]
    # the same claims against a spec given in Python
    spec = load_spec(tmp_path / "s.toml")
    assert (
        verdicts(check(spec, {"claims": {"scaled": [["0.707", "0.071", "0.566"]] * 3}}))[
            ("scaled", "it", "cat", "0.707")
        ]
        == "wrong"
    )


BAD = [
    (
        {"colour": 1},
        "c.json: claims.colour: unknown quantity; expected one of sqrt_dk, scale, scores, scaled, shifted, exp, "
        "exp_sum, weights, percent, output, lse, rows",
    ),
    ({"weights": [[1, 0]]}, "c.json: claims.weights: shape mismatch: weights has 3 rows here, got 1"),
    (
        {"weights": [[1, 0], [1, 0], [1, 0]]},
        "c.json: claims.weights[1]: shape mismatch: weights has 3 entries here, got 2",
    ),
    ({"scaled": [["0.7", "x", 0]] * 3}, "c.json: claims.scaled[1][2]: not a number: 'x'"),
    (
        {"rows": {"dog": {"exp": [1, 2, 3]}}},
        "c.json: claims.rows.dog: no token labelled 'dog'; tokens are cat, eats, it",
    ),
    ({"rows": {"4": {"exp": [1, 2, 3]}}}, "c.json: claims.rows.4: 4 is out of range 1..3"),
    (
        {"rows": {"it": {"sqrt_dk": 1}}},
        "c.json: claims.rows.it.sqrt_dk: unknown quantity; expected one of scores, "
        "scaled, shifted, exp, exp_sum, weights, percent, output, lse",
    ),
    ({"weights[4][1]": 1}, "c.json: claims.weights[4][1]: index 4 is out of range 1..3"),
    ({"output[1][1][1]": 1}, "c.json: claims.output[1][1][1]: output takes 2 index(es), got 3"),
    ({"percent[1][1]": "1/3"}, "c.json: claims.percent[1][1]: expected a percentage such as 40.3%, got '1/3'"),
]


@pytest.mark.parametrize("claims, message", BAD)
def test_bad_claims(tmp_path, monkeypatch, claims, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text(builtin.example_text("seed", "en"), encoding="utf-8")
    (tmp_path / "c.json").write_text(json.dumps({"spec": "s.toml", "claims": claims}), encoding="utf-8")
    with pytest.raises(SpecError) as info:
        check(None, "c.json")
    assert str(info.value) == message


@pytest.mark.parametrize(
    "data, message",
    [
        (
            {"spec": "s.toml", "Q": [[1]], "claims": {}},
            'c.json: Q: give the inputs inline or as spec = "path", not both',
        ),
        ({"spec": "s.toml"}, "c.json: claims: missing"),
        (
            {"spec": "s.toml", "claim": {}},
            "c.json: claim: unknown key; expected one of K, Q, V, W_K, W_O, W_Q, W_V, X, "
            "X_kv, alibi, alibi_slopes, b_K, b_O, b_Q, b_V, backward, block_keys, causal_align, cjk_font, "
            "claims, decimals, engine, expand, figures, focus, heading_level, heads, inputs, k_norm_weight, "
            "key_padding, key_positions, key_tokens, kv_heads, lang, layout, mask, mla, mla_route, notation, numbered, paper, "
            "positions, q_norm_weight, qk_norm, qk_norm_eps, rope, rope_base, rope_cos, rope_frequencies, "
            "rope_sin, rope_style, rounding, scale, sinks, softcap, softcap_order, softmax, spec, split_keys, "
            "subs, title, tokens, window "
            "(did you mean 'claims'?)",
        ),
        ({"spec": "nope.toml", "claims": {}}, "c.json: spec: cannot read 'nope.toml': no such file"),
    ],
)
def test_bad_claims_files(tmp_path, monkeypatch, data, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text(builtin.example_text("seed", "en"), encoding="utf-8")
    (tmp_path / "c.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SpecError) as info:
        check(None, "c.json")
    assert str(info.value) == message


def test_cli_bad_claims_is_one_line_exit_2(tmp_path, capsys):
    bad = tmp_path / "c.toml"
    bad.write_text('Q = [[1]]\nK = [[1]]\nV = [[1]]\n[claims]\nexp = [["e"]]\n', encoding="utf-8")
    assert main(["check", str(bad)]) == 2
    assert capsys.readouterr().err == f"symattn: {bad}: claims.exp[1][1]: not a number: 'e'\n"


# --- properties ----------------------------------------------------------

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
QUANTITIES = ("scores", "scaled", "exp", "weights", "output")


def claims_of(model, decimals):
    return {q: [[format(x, "f") for x in row] for row in model.rounded(q, decimals)] for q in QUANTITIES}


@SETTINGS
@given(specs(max_tokens=3), st.integers(0, 8))
def test_the_models_own_values_are_never_wrong(raw, decimals):
    model = build_model(load_spec(raw))
    report = check(load_spec(raw), {"claims": claims_of(model, decimals)})
    assert {v.verdict for v in report.results} <= {"exact", "rounded", "carried"}


@SETTINGS
@given(
    specs(max_tokens=3), st.integers(1, 6), st.sampled_from(QUANTITIES), st.integers(2, 50), st.booleans(), st.data()
)
def test_a_claim_two_units_off_is_wrong_or_carried(raw, decimals, quantity, units, up, data):
    spec = load_spec(raw)
    model = build_model(spec)
    rows = model.rounded(quantity, decimals)
    i = data.draw(st.integers(0, len(rows) - 1))
    j = data.draw(st.integers(0, len(rows[0]) - 1))
    off = rows[i][j] + (1 if up else -1) * units * Decimal(1).scaleb(-decimals)
    report = check(spec, {"claims": {f"{quantity}[{i + 1}][{j + 1}]": format(off, "f")}})
    assert report.results[0].verdict in ("wrong", "carried")


@SETTINGS
@given(specs(max_tokens=3), st.integers(2, 4), st.integers(2, 30), st.data())
def test_an_early_error_is_carried_forward(raw, decimals, units, data):
    spec = load_spec(raw)
    model = build_model(spec)
    n = len(spec.Q)
    i = data.draw(st.integers(0, n - 1))
    unit = Fraction(1, 10**decimals)
    # the claimant gets one scaled score wrong, then computes on correctly from their own numbers
    z = [Fraction(x) for x in model.rounded("scaled", decimals)[i]]
    z[0] += units * unit
    exps = [
        numeric.round_expr(numeric.sympy.exp(numeric.sympy.Rational(x.numerator, x.denominator)), decimals) for x in z
    ]
    total = sum(Fraction(e) for e in exps)
    assume(total > 0)  # every exp rounded to zero leaves nothing to divide by
    weights = [round_half_up(Fraction(e) / total, decimals) for e in exps]
    V = [[x.value for x in row] for row in spec.V]
    output = [
        round_half_up(sum(Fraction(w) * V[j][k] for j, w in enumerate(weights)), decimals) for k in range(len(V[0]))
    ]
    row = {
        "scaled": [format(round_half_up(x, decimals), "f") for x in z],
        "exp": [format(e, "f") for e in exps],
        "exp_sum": format(round_half_up(total, decimals), "f"),
        "weights": [format(w, "f") for w in weights],
        "output": [format(o, "f") for o in output],
    }
    report = check(spec, {"claims": {"rows": {str(i + 1): row}}})
    later = [v for v in report.results if v.claim.quantity != "scaled"]
    assert {v.verdict for v in later} <= {"exact", "rounded", "carried"}


def test_claims_on_projected_q_k_v(tmp_path):
    claims = {
        "spec": _beside(tmp_path, builtin.example_path("projection", "en")),
        "claims": {"Q[3][1]": "1.2", "K[1][2]": "0.45", "scores[3][2]": "0.12", "scores[3][1]": "1.2"},
    }
    report = check(None, claims_file(tmp_path, claims))
    got = {(v.claim.quantity, v.row_label, v.col_label): v.verdict for v in report.results}
    # Q[3][1] is 1.1; the score 1.2 follows from their own 1.2 (1.2×1.00 + 0.0×0.45)
    assert got == {
        ("Q", "it", 1): "wrong",  # X W is 1.1 exactly: one unit off with no rounding on its path
        ("K", "cat", 2): "exact",
        ("scores", "it", "cat"): "carried",
        ("scores", "it", "eats"): "carried",
    }
    first = report.first_problem
    assert (first.claim.quantity, str(first.expected)) == ("Q", "1.1")
    assert first.explanation.operands[1].text == "0.1"  # + b_Q


def test_claims_on_q_need_a_projection(tmp_path):
    claims = {"spec": _beside(tmp_path, builtin.example_path("seed", "en")), "claims": {"Q[1][1]": 1}}
    with pytest.raises(SpecError) as info:
        check(None, claims_file(tmp_path, claims))
    assert str(info.value).endswith(
        "claims.Q[1][1]: Q is an input here; claims on Q, K and V need X with W_Q, W_K, W_V"
    )


def test_check_refuses_missing_values(tmp_path):
    spec = {"Q": [["a", 0]], "K": [[1, 0]], "V": [[2]], "claims": {"weights": [[1]]}}
    with pytest.raises(SpecError) as info:
        check(None, claims_file(tmp_path, spec))
    assert str(info.value).endswith(": subs: give a value for every symbol to check numbers; missing: a")
    report = check(None, claims_file(tmp_path, {**spec, "subs": {"a": 3}}))
    assert report.results[0].verdict == "exact"


def claims_file(tmp_path, data):
    path = tmp_path / "claims.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    "claims, diagnosis",
    [
        ({"scaled[1][1]": "1.000"}, "no_scaling"),  # S itself: never divided by √d_k
        ({"weights[1][2]": "0.196"}, "column_softmax"),  # e^{z_12} over the column's exps
        ({"weights[2][1]": "0.333"}, "no_exp"),  # z_21 / (z_21 + z_22)
        ({"output[1][1]": "1.330"}, "transposed_V"),  # Σ_k A_1k V_1k
        ({"weights[1][2]": "0.500"}, None),  # wrong, and no classic slip gives it
    ],
)
def test_classic_slips_are_named(claims, diagnosis):
    spec = {"lang": "en", "tokens": ["a", "b"], "Q": [[1, 0], [1, 2]], "K": [[1, 0], [0, 1]], "V": [[1, 2], [3, 4]]}
    report = check(spec, {"claims": claims})
    assert [(r.verdict, r.diagnosis) for r in report.results] == [("wrong", diagnosis)]


def _beside(folder, spec) -> str:
    """The example spec copied beside the claims file, named as a claims file names its spec: a plain name."""
    shutil.copyfile(spec, folder / spec.name)
    return spec.name


@pytest.mark.parametrize(
    "scale, lines",
    [
        (
            '"1/2"',  # 2 × 1/2 and 3 × 1/2: products of the given numbers, nothing rounded: one off is wrong
            [
                "2   scaled S × 1/2 (t2, t1)     1.1       wrong         1 = 1",
                "3   scaled S × 1/2 (t2, t2)     1.4       wrong         1.5 = 3/2",
            ],
        ),
        (
            '"none"',  # z is the score itself (this stopped check with a traceback)
            [
                "2   unscaled z = S (t2, t1)     1.1       wrong         2 = 2",
                "3   unscaled z = S (t2, t2)     1.4       wrong         3 = 3",
            ],
        ),
    ],
)
def test_scaled_scores_of_a_rational_scale_are_named_by_it_and_one_off_is_wrong(tmp_path, capsys, scale, lines):
    claims = tmp_path / "c.toml"
    claims.write_text(
        f"Q = [[1, 0], [2, 1]]\nK = [[1, 0], [1, 1]]\nV = [[1], [0]]\nscale = {scale}\n"
        '[claims]\n"scores[2][2]" = 3\n"scaled[2][2]" = 1.4\n"scaled[2][1]" = 1.1\n',
        encoding="utf-8",
    )
    assert main(["check", str(claims)]) == 1  # a claim is wrong
    out = capsys.readouterr().out.splitlines()
    assert out[5:7] == lines
