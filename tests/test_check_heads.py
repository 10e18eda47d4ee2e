"""Checking several heads: per-head claims (hN.), concat and the output after W_O, Q, K, V given directly,
error carried forward within a head and into concat, and the heads' gradients."""

import json
import shutil
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from symattn.checking.checker import check
from symattn.checking.report import report_data
from symattn.derivation.derive import derive
from symattn.derivation.intermediates import compute
from symattn.exact.factory import build
from symattn.exact.multihead import build_multihead
from symattn.input import builtin
from symattn.input.errors import SpecError
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render, render_report

from . import independent as ind
from .strategies import decimal_text

# A 3-token exercise with 2 heads, Q, K, V given directly (as torch's multi-head attention sees them with
# identity projections): d_model = 8, so each head has d_head = 4 and is scaled by 1/√4 = 1/2 exactly.
EXERCISE = {
    "lang": "en",
    "tokens": ["the", "cat", "sat"],
    "heads": 2,
    "Q": [[1, 0, 1, 0, 0, 1, 0, 1], [0, 1, 0, 1, 1, 0, 1, 0], [1, 1, 0, 0, 1, 1, 0, 0]],
    "K": [[1, 0, 0, 1, 1, 1, 0, 0], [0, 1, 0, 0, 0, 0, 1, 1], [1, 1, 1, 0, 1, 0, 1, 0]],
    "V": [[1, 0, 2, 0], [0, 1, 0, 2], [1, 1, 1, 1]],
    "W_O": [[1, 0, 0, 1], [0, 1, 1, 0], [1, 0, 1, 0], [0, 1, 0, 1]],
    "b_O": [0, 0, "0.5", 0],
}


def fractions(m):
    return [[Fraction(x) for x in row] for row in m]


def published():
    """The exercise's answers, computed with Fractions only: each head's weights and output, concat, output."""
    Q, K, V = (fractions(EXERCISE[k]) for k in "QKV")
    heads = [
        ind.head(ind.columns(Q, 4 * h, 4), ind.columns(K, 4 * h, 4), ind.columns(V, 2 * h, 2), Fraction(1, 2))
        for h in (0, 1)
    ]
    concat = [heads[0][5][i] + heads[1][5][i] for i in range(3)]
    return heads, concat


def after_W_O(concat_row):
    """The output row from a concat row: concat W_O + b_O."""
    W, b = fractions(EXERCISE["W_O"]), [Fraction(x) for x in EXERCISE["b_O"]]
    return [sum((c * W[r][k] for r, c in enumerate(concat_row)), Fraction(0)) + b[k] for k in range(4)]


def texts(row, decimals=3):
    return [ind.text(x, decimals) for x in row]


def test_published_answers_of_two_heads_are_right():
    heads, concat = published()
    values = {
        "h1.scores": heads[0][0],
        "h2.scores": heads[1][0],
        "h1.weights": heads[0][4],
        "h2.weights": heads[1][4],
        "h1.output": heads[0][5],
        "h2.output": heads[1][5],
        "concat": concat,
        "output": [after_W_O(row) for row in concat],
    }
    claims = {key: [texts(row) for row in m] for key, m in values.items()}
    claims["h2"] = {"output": claims.pop("h2.output")}  # [claims.h2] as a table
    claims["sqrt_dk"] = "2"
    report = check(EXERCISE, {"claims": claims})
    # exact where the independent value is the claimed number itself (2/3 is not 0.667), rounded elsewhere
    for v in report.results:
        key = "h2.output" if v.claim.key == "claims.h2.output" else v.claim.key.removeprefix("claims.")
        value = Fraction(2) if key == "sqrt_dk" else values[key][v.claim.row][v.claim.col]
        assert v.verdict == ("exact" if value == v.claim.number.value else "rounded"), v
    assert dict(report.counts) == {"exact": 27, "rounded": 46, "carried": 0, "last-digit": 0, "wrong": 0}
    got = {(v.head, v.claim.quantity, v.row_label, v.col_label): v for v in report.results}
    assert got[(1, "output", "the", 1)].verdict == "exact"  # equal weights on V = [2, 0] and [0, 2], then [1, 1]
    assert str(got[(0, "weights", "cat", "sat")].closed_form) == "1/3"
    assert str(got[(None, "output", "sat", 3)].value.value) == "2.54609"


def slipped_claims():
    """A student's answers: one slip in head 2 (0.407 for 0.307), then on correctly from their own numbers."""
    heads, concat = published()
    weights = [[ind.half_up(x, 3) for x in row] for row in heads[1][4]]
    weights[2][2] += Fraction(1, 10)
    # head 2's outputs from their rounded weights: 2 × 0.384 + 0.233 = 1.001 where the exact value is 1
    V2 = ind.columns(fractions(EXERCISE["V"]), 2, 2)
    out2 = [[ind.half_up(x, 3) for x in row] for row in ind.matmul(weights, V2)]
    mine = [[ind.half_up(x, 3) for x in row] for row in heads[0][5]]
    concat_mine = [a + b for a, b in zip(mine, out2)]
    return {
        "h2.weights": [texts(row) for row in weights[:2]] + [[""] * 3],
        "rows": {"sat": {"h2.weights": texts(weights[2])}},
        "h2.output": [texts(row) for row in out2],
        "concat": [texts(row) for row in concat_mine],
        "output": [texts(after_W_O(row)) for row in concat_mine],
    }


def test_a_slip_in_head_2_is_found_and_carried_into_concat_and_the_output():
    report = check(EXERCISE, {"claims": slipped_claims()})
    got = [(v.claim.key, v.head, v.row_label, v.col_label, v.claim.number.text, v.verdict) for v in report.results]
    head2 = [g[2:] for g in got if g[1] == 1 and g[2] != "cat"]
    assert head2 == [
        ("the", "the", "0.384", "rounded"),
        ("the", "cat", "0.384", "rounded"),
        ("the", "sat", "0.233", "rounded"),
        ("sat", "the", "0.506", "rounded"),
        ("sat", "cat", "0.186", "rounded"),
        ("sat", "sat", "0.407", "wrong"),  # the slip: 0.307
        ("the", 1, "1.001", "carried"),  # 2 × 0.384 + 0.233, where the exact value is 1
        ("the", 2, "1.001", "carried"),
        ("sat", 1, "1.419", "carried"),  # 2 × 0.506 + 0.407
        ("sat", 2, "0.779", "carried"),  # 2 × 0.186 + 0.407
    ]
    concat = {(g[2], g[3]): (g[4], g[5]) for g in got if g[0] == "claims.concat"}
    assert [concat[("sat", k)] for k in (1, 2, 3, 4)] == [
        ("0.726", "rounded"),
        ("0.726", "rounded"),
        ("1.419", "carried"),
        ("0.779", "carried"),
    ]
    output = {(g[2], g[3]): (g[4], g[5]) for g in got if g[0] == "claims.output"}
    # 0.726 + 1.419, 0.726 + 0.779, 0.726 + 1.419 + 0.5, 0.726 + 0.779: from their own concat
    assert [output[("sat", k)] for k in (1, 2, 3, 4)] == [
        ("2.145", "carried"),
        ("1.505", "carried"),
        ("2.645", "carried"),
        ("1.505", "carried"),
    ]
    assert dict(report.counts) == {"exact": 4, "rounded": 18, "carried": 16, "last-digit": 0, "wrong": 1}
    assert report.blanks == ("claims.h2.weights[3][1]", "claims.h2.weights[3][2]", "claims.h2.weights[3][3]")
    assert [v.verdict for v in report.results].count("wrong") == 1
    first = report_data(report)["summary"]["first_wrong"]
    assert (first["key"], first["head"], first["row"], first["col"], first["expected"]) == (
        "claims.rows.sat.h2.weights",
        2,
        "sat",
        "sat",
        "0.307",
    )
    text = render_report(report, "text")
    assert (
        "  weight A of head 2 (sat, sat): 0.407 — wrong\n    1.64872 / 5.36700 ≈ 0.307196; correctly rounded: 0.307\n"
        in text
    )
    assert "Fix first: weight A of head 2 (sat, sat) is given as 0.407 but should be 0.307" in text


def test_q_k_v_claims_are_the_whole_projections(tmp_path):
    spec = builtin.example_path("multihead", "en")
    Q = [[x.text for x in row] for row in load_spec(spec).Q]
    assert Q[2] == ["1.30", "0.20", "1.10", "0.40"]
    Q[2][2] = "1.20"  # every head's columns side by side; a slip in column 3, head 2's first
    claims = {"Q": Q, "h1.scores[3][1]": "1.35", "h2.scores[3][1]": "1.2", "h2.Q[3][2]": "0.4"}
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"spec": _beside(tmp_path, spec), "claims": claims}), encoding="utf-8")
    with pytest.raises(SpecError) as info:  # Q claims Q[3][4] too: one number, two names, two verdicts
        check(None, str(path))
    assert str(info.value) == (
        f"{path}: claims.h2.Q[3][2]: the same entry as claims.Q[3][4] (both keys name one number); claim it once"
    )
    claims = {"Q[3][3]": "1.20", **{k: v for k, v in claims.items() if k != "Q"}}
    path.write_text(json.dumps({"spec": _beside(tmp_path, spec), "claims": claims}), encoding="utf-8")
    got = {(v.claim.key, v.row_label, v.col_label): v.verdict for v in check(None, str(path)).results}
    assert got[("claims.Q[3][3]", "it", 3)] == "wrong"
    assert got[("claims.h2.Q[3][2]", "it", 2)] == "exact"  # head 2's column 2 (column 4 of Q), named as written
    assert got[("claims.h1.scores[3][1]", "it", "cat")] == "exact"  # 1.30 × 1.00 + 0.20 × 0.25: head 1's columns
    assert got[("claims.h2.scores[3][1]", "it", "cat")] == "carried"  # 1.20 × 1.00 + 0.40 × 0.00 (exactly 1.1)


BAD = [
    ({"scores": [[1, 2, 3]] * 3}, "claims.scores: scores is claimed per head: h1.scores to h2.scores"),
    ({"h1.concat": [[1] * 4] * 3}, "claims.h1.concat: concat is not per head: claim it without the prefix"),
    ({"h3.weights[1][1]": 1}, "claims.h3.weights[1][1]: head 3 is out of range 1..2"),
    ({"h0": {"weights[1][1]": 1}}, "claims.h0: head 0 is out of range 1..2"),
    ({"h1.weights[1][4]": 1}, "claims.h1.weights[1][4]: index 4 is out of range 1..3"),
    ({"h2.output[1][3]": 1}, "claims.h2.output[1][3]: index 3 is out of range 1..2"),
    ({"output[1][5]": 1}, "claims.output[1][5]: index 5 is out of range 1..4"),
    ({"concat[4][1]": 1}, "claims.concat[4][1]: index 4 is out of range 1..3"),
    (
        {"h1": {"rows": {"dog": {"exp": [1, 2, 3]}}}},
        "claims.h1.rows.dog: no token labelled 'dog'; tokens are the, cat, sat",
    ),
    ({"dV[1][1]": 1}, "claims.dV[1][1]: a claim on a gradient needs [backward] in the spec (or --backward)"),
]


@pytest.mark.parametrize("claims, message", BAD)
def test_bad_claims_on_heads(claims, message):
    with pytest.raises(SpecError) as info:
        check(EXERCISE, {"claims": claims})
    assert str(info.value) == "<dict>: " + message


def test_one_head_has_no_concat_and_h1_is_the_head():
    seed = builtin.example_path("seed", "en")
    with pytest.raises(SpecError) as info:
        check(seed, {"claims": {"concat[1][1]": 1}})
    assert (
        str(info.value)
        == "<dict>: claims.concat[1][1]: concat is a quantity of several heads or W_O; this spec has one head"
    )
    report = check(seed, {"claims": {"h1.weights[3][1]": "0.403", "weights[3][2]": "0.24"}})
    assert [(v.claim.key, v.head, v.verdict) for v in report.results] == [
        ("claims.h1.weights[3][1]", None, "rounded"),
        ("claims.weights[3][2]", None, "rounded"),
    ]
    with pytest.raises(SpecError) as info:  # h1.weights is weights: one entry under two names
        check(seed, {"claims": {"h1.weights[3][1]": "0.403", "weights[3][1]": "0.40"}})
    assert str(info.value) == (
        "<dict>: claims.weights[3][1]: the same entry as claims.h1.weights[3][1] (both keys name one number); "
        "claim it once"
    )


def test_render_and_compute_several_heads_given_directly():
    spec = load_spec(EXERCISE)
    data = compute(spec, digits=6)
    assert (data["d_model"], len(data["heads"]), data["heads"][1]["d_k"]) == (8, 2, 4)
    assert data["heads"][1]["output"]["exact"][0] == ["1", "1"]
    assert data["concat"]["value"][2][2:] == ["1.32016", "0.679843"]
    text = render(derive(spec), "markdown")
    assert "2 heads: $d_{model} = 8$, each head has $d_{head} = 4$" in text
    assert "## Head 2: columns 5–8 of Q and K, 3–4 of V" in text
    assert "Projections" not in text


def test_gradients_per_head():
    spec = {**EXERCISE, "backward": {"loss": "sum"}}
    model_weights = [[ind.half_up(x, 3) for x in row] for row in published()[0][1][4]]
    # dV = Aᵀ dO with dO = dconcat = 1 W_Oᵀ: each head's slice; from their own head 2 weights
    dconcat = [sum(Fraction(x) for x in row) for row in EXERCISE["W_O"]]
    dV2 = [[sum(model_weights[i][j] * dconcat[2 + k] for i in range(3)) for k in range(2)] for j in range(3)]
    claims = {
        "dO[1][1]": 1,
        "dconcat": [[str(x) for x in dconcat]] * 3,
        "h2.dO[3][2]": "2",
        "h2.weights": [texts(row) for row in model_weights],
        "h2.dV": [texts(row) for row in dV2],
        "h2.rowsum[1]": "4.1",
        "h1.dQ[1][1]": "0.096",
        "dQ[1][1]": "0.096",
    }
    report = check(spec, {"claims": claims})
    got = {(v.claim.key, v.row_label, v.col_label): v.verdict for v in report.results}
    assert got[("claims.dO[1][1]", "the", 1)] == "exact"
    assert got[("claims.dconcat", "sat", 4)] == "exact"
    assert got[("claims.h2.dO[3][2]", "sat", 2)] == "exact"
    assert {got[("claims.h2.dV", key, k)] for key in ("the", "cat", "sat") for k in (1, 2)} <= {
        "exact",
        "rounded",
        "carried",
    }
    assert got[("claims.h2.rowsum[1]", "the", None)] == "last-digit"  # r = 4 exactly
    assert got[("claims.h1.dQ[1][1]", "the", 1)] == "wrong"  # 0.094
    assert got[("claims.dQ[1][1]", "the", 1)] == "carried"  # head 1's dQ, as claimed
    order = [v.claim.key for v in report.results]
    assert order.index("claims.dO[1][1]") < order.index("claims.dconcat") < order.index("claims.h2.dO[3][2]")
    assert order.index("claims.h1.dQ[1][1]") < order.index("claims.h2.dV") < order.index("claims.dQ[1][1]")


# --- Hypothesis: a slip planted in head 2 is found, and carried into concat -----------------------------

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def two_heads(draw):
    """Two heads with Q, K, V given directly (d_head 1 or 2, V 1 or 2 columns a head), sometimes W_O."""
    n = draw(st.integers(1, 3))
    d, w = draw(st.integers(1, 2)), draw(st.integers(1, 2))

    def matrix(rows, cols):
        return draw(st.lists(st.lists(decimal_text(2, 1), min_size=cols, max_size=cols), min_size=rows, max_size=rows))

    raw = {"heads": 2, "Q": matrix(n, 2 * d), "K": matrix(n, 2 * d), "V": matrix(n, 2 * w)}
    if draw(st.booleans()):
        raw["W_O"] = matrix(2 * w, 2)
        raw["b_O"] = matrix(1, 2)[0]
    return raw


@SETTINGS
@given(two_heads(), st.integers(2, 3), st.integers(2, 40), st.booleans(), st.data())
def test_a_slip_in_head_2_is_found_and_carried_into_concat(raw, decimals, units, up, data):
    spec = load_spec(raw)
    mh = build_multihead(spec)
    n, w = len(spec.tokens), len(spec.V[0]) // 2
    i = data.draw(st.integers(0, n - 1))
    j = data.draw(st.integers(0, n - 1))
    unit = Fraction(1, 10**decimals)
    weights = [Fraction(x) for x in mh.heads[1].rounded("weights", decimals)[i]]
    weights[j] += (1 if up else -1) * units * unit
    V2 = [[x.value for x in row[w:]] for row in spec.V]
    out = [ind.half_up(sum((a * V2[k][c] for k, a in enumerate(weights)), Fraction(0)), decimals) for c in range(w)]
    exact_out = [Fraction(x) for x in mh.heads[1].rounded("output", decimals)[i]]
    assume(out != exact_out)  # a slip that changes no output (V constant down a column) is carried nowhere
    head1 = [format(x, "f") for x in mh.heads[0].rounded("output", decimals)[i]]
    concat = head1 + [ind.text(x, decimals) for x in out]
    claims = {
        f"h2.weights[{i + 1}]": [ind.text(x, decimals) for x in weights],
        f"h2.output[{i + 1}]": [ind.text(x, decimals) for x in out],
        f"concat[{i + 1}]": concat,
    }
    report = check(spec, {"claims": claims})
    verdict = {(v.claim.quantity, v.head, v.claim.col): v.verdict for v in report.results}
    assert verdict[("weights", 1, j)] == "wrong"  # the planted slip, found
    for c in range(w):
        if out[c] != exact_out[c]:
            assert verdict[("output", 1, c)] == "carried"
            assert verdict[("concat", None, w + c)] == "carried"  # carried into concat
    assert [v.verdict for v in report.results].count("wrong") == 1


@st.composite
def layers(draw):
    """Several heads with projections, W_O and every bias (sometimes X_kv), a loss, maybe the stable softmax."""
    from .strategies import multihead_base

    raw = multihead_base(draw)[0]
    raw["backward"] = {"loss": "sum"}
    if draw(st.booleans()):
        raw["softmax"] = "stable"
    return raw


def own_numbers(spec, model, decimals):
    """Every claimable quantity of every head and of the layer, as the model rounds it."""

    def text(rows):
        return [[format(x, "f") for x in row] for row in rows]

    def column(rows):
        return [format(row[0], "f") for row in rows]

    exp = "exp_shifted" if spec.softmax == "stable" else "exp"
    claims = {q: [[x.text for x in row] for row in getattr(spec, q)] for q in "QKV"}
    claims["sqrt_dk"] = format(model.forward.heads[0].rounded("sqrt_dk", decimals)[0][0], "f")
    claims["scale"] = format(model.forward.heads[0].rounded("scale", decimals)[0][0], "f")
    for h, (head, grads) in enumerate(zip(model.forward.heads, model.head_views), 1):
        for q in ("scores", "scaled", "shifted", "weights", "output"):
            claims[f"h{h}.{q}"] = text(head.rounded(q, decimals))
        claims[f"h{h}.exp"] = text(head.rounded(exp, decimals))
        claims[f"h{h}.exp_sum"] = column(head.rounded(exp + "_sum", decimals))
        for q in ("dO", "dV", "dA", "dZ", "dS", "dQ", "dK"):
            claims[f"h{h}.{q}"] = text(grads.rounded(q, decimals))
        claims[f"h{h}.rowsum"] = column(grads.rounded("dot", decimals))
    claims["concat"] = text(model.forward.rounded("concat", decimals))
    claims["output"] = text(model.forward.rounded("output", decimals))
    layer = ["dO", "dW_O", "dconcat", "dQ", "dK", "dV", "dW_Q", "dW_K", "dW_V"]
    for q in layer + ([] if spec.projection.X_kv is not None else ["dX"]):
        claims[q] = text(model.rounded(q, decimals))
    return claims


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers(), st.integers(1, 3))
def test_a_layers_own_numbers_are_never_wrong(raw, decimals):
    spec = load_spec(raw)
    model = build(spec)
    report = check(spec, {"claims": own_numbers(spec, model, decimals)})
    assert {v.verdict for v in report.results} <= {"exact", "rounded"}
    heads = {v.head for v in report.results}
    assert heads == {None, *range(spec.heads)}


def test_the_claims_file_syntax_of_several_heads(tmp_path):
    """The forms a worksheet's answers take in TOML: a quoted key, a dotted key, a head's row section."""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'lang = "zh"\ntokens = ["小猫", "吃", "它"]\nheads = 2\n'
        + "".join(f"{k} = {json.dumps(EXERCISE[k])}\n" for k in ("Q", "K", "V", "W_O", "b_O")),
        encoding="utf-8",
    )
    heads, concat = published()
    claims = tmp_path / "answers.toml"
    claims.write_text(
        'spec = "spec.toml"\n[claims]\n'
        '"h1.weights[1][2]" = "0.19"\n'
        f"h2.output = {json.dumps([texts(row) for row in heads[1][5]])}\n"
        f"concat = {json.dumps([texts(row) for row in concat])}\n"
        '[claims.h1.rows."它"]\n'
        f"weights = {json.dumps(texts(heads[0][4][2]))}\n"
        f'exp_sum = "{ind.text(heads[0][3][2], 3)}"\n',
        encoding="utf-8",
    )
    report = check(None, str(claims))
    got = [(v.claim.key, v.head, v.row_label, v.col_label, v.verdict) for v in report.results]
    assert got[:5] == [
        ("claims.h1.rows.它.exp_sum", 0, "它", None, "rounded"),
        ("claims.h1.weights[1][2]", 0, "小猫", "吃", "rounded"),
        ("claims.h1.rows.它.weights", 0, "它", "小猫", "rounded"),
        ("claims.h1.rows.它.weights", 0, "它", "吃", "rounded"),
        ("claims.h1.rows.它.weights", 0, "它", "它", "rounded"),
    ]
    assert {v.verdict for v in report.results} <= {"exact", "rounded"}
    assert len(report.results) == 5 + 6 + 12
    text = render_report(report, "text")
    assert "第 1 个头的 e^z 之和（它）" in text
    assert "第 2 个头的输出（它，第 2 列）" in text


@pytest.mark.parametrize(
    "lang, header, rows",
    [
        (
            "en",
            "#   quantity                                               claimed   verdict       exact",
            [
                "1   query Q (the, column 1)                                0         wrong         1 = 1",
                "2   MLA latent output u = P c_KV of head 1 (the, column 1) 1         rounded       0.945116 = ",
            ],
        ),
        (
            "zh",
            "#   量                                                 给出的数  结论          精确值",
            [
                "1   查询 Q（猫，第 1 列）                              0         错误          1 = 1",
                "2   第 1 个头的 MLA 潜在输出 u = P c_KV（猫，第 1 列） 1         正确舍入      0.945116 = ",
            ],
        ),
    ],
)
def test_the_report_s_columns_line_up_after_its_longest_quantity(lang, header, rows):
    # a CJK character takes two columns in a terminal
    report = check(
        load_spec(builtin.example_path("mla-heads", lang)), {"claims": {"h1.latent_output[1][1]": "1", "Q[1][1]": "0"}}
    )
    table = render_report(report, "text").split("\n\n")[1].splitlines()
    assert table[0].startswith(header)
    assert [line[: len(row)] for line, row in zip(table[1:], rows, strict=True)] == rows


def _beside(folder, spec) -> str:
    """The example spec copied beside the claims file, named as a claims file names its spec: a plain name."""
    shutil.copyfile(spec, folder / spec.name)
    return spec.name
