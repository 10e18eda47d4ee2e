"""``inputs = "rounded"``: claims that only the typed inputs' rounding explains are ``input-rounding``.

A notebook-like case: true inputs with 8 decimals, printed to 4; the printed outputs come from the
true inputs (computed independently, tests/independent.py).
"""

import random
from fractions import Fraction

import pytest

from symattn.checking.checker import check
from symattn.checking.enclosure import Enclosure, typed
from symattn.checking.report import report_data
from symattn.exact.heads import build_model
from symattn.input.errors import SpecError
from symattn.input.numeral import parse_numeral
from symattn.input.spec import spec_from_mapping
from symattn.rendering.renderer import render_report

from . import independent as ind

TOKENS = ["t1", "t2", "t3", "t4"]


def notebook(seed: int):
    """The printed inputs (4 decimals) and claims (4 decimals) of the true values."""
    rng = random.Random(seed)
    true = {k: [[Fraction(rng.randint(-2 * 10**8, 2 * 10**8), 10**8) for _ in range(4)] for _ in TOKENS] for k in "QKV"}
    _, Z, _, _, A, O = ind.head(true["Q"], true["K"], true["V"], Fraction(1, 2))  # d_k = 4: 1/√4 exact
    claims = {name: [[ind.text(x, 4) for x in row] for row in M] for name, M in (("scaled", Z), ("weights", A))}
    claims["output"] = [[ind.text(x, 4) for x in row] for row in O]
    printed = {k: [[ind.text(x, 4) for x in row] for row in M] for k, M in true.items()}
    return {"tokens": TOKENS, **printed}, claims


def verdicts(report):
    return {f"{v.claim.quantity}[{v.claim.row + 1}][{v.claim.col + 1}]": v.verdict for v in report.results}


def test_rounded_inputs_explain_what_the_exact_ones_flag():
    inputs, claims = notebook(3)
    plain = verdicts(check(None, {**inputs, "claims": claims}))
    flagged = {k for k, v in plain.items() if v in ("wrong", "last-digit")}
    assert len(flagged) == 9
    rounded = check(None, {**inputs, "inputs": "rounded", "claims": claims})
    got = verdicts(rounded)
    assert {k for k, v in got.items() if v == "input-rounding"} == flagged
    assert {k: v for k, v in got.items() if k not in flagged} == {k: v for k, v in plain.items() if k not in flagged}
    assert rounded.ok and dict(rounded.counts)["input-rounding"] == 9
    first = next(v for v in rounded.results if v.verdict == "input-rounding")
    assert first.rounded_inputs[0].startswith("Q[")
    data = report_data(rounded)["claims"]
    assert next(c for c in data if c["verdict"] == "input-rounding")["rounded_inputs"] == list(first.rounded_inputs)


def test_a_real_slip_stays_wrong():
    inputs, claims = notebook(3)
    claims["output"][1][2] = ind.text(Fraction(claims["output"][1][2]) + Fraction(1, 100), 4)
    claims["weights"][2][0] = ind.text(Fraction(claims["weights"][2][0]) + Fraction(5, 1000), 4)
    got = verdicts(check(None, {**inputs, "inputs": "rounded", "claims": claims}))
    assert (got["output[2][3]"], got["weights[3][1]"]) == ("wrong", "wrong")


def test_the_report_names_the_inputs():
    spec = {"tokens": ["a"], "Q": [["0.5", "1.0"]], "K": [["1.0", "0.0"], ["0.0", "1.0"]], "V": [["1", "2"]] * 2}
    spec["key_tokens"] = ["x", "y"]
    # exact: 0.5 / √2 = 0.354 (0.35 at two decimals); the typed intervals reach 0.265 to 0.446
    claims = {"scaled[1][1]": "0.38", "scaled[1][2]": "0.9"}
    report = check(None, {**spec, "inputs": "rounded", "claims": claims})
    assert [v.verdict for v in report.results] == ["input-rounding", "wrong"]
    text = render_report(report, "text")
    assert (
        "rounded input 0.353553 = sqrt(2)/4 (right for inputs that round to the typed ones: the rounding of Q[1], K[1] explains it)"
        in text
    )
    zh = render_report(check(None, {**spec, "lang": "zh", "inputs": "rounded", "claims": claims}), "text")
    assert "（对舍入成所给输入的某些值是对的：Q[1]、K[1] 的舍入可以解释它）" in zh


def test_enclosures_hold_every_reachable_value():
    data = {
        "Q": [["0.3", "-1.2"], ["1", "0.25"]],
        "K": [["0.1", "2"], ["-0.5", "1/3"]],
        "V": [["1.5", "2"], ["-3", "0.7"]],
    }
    spec = spec_from_mapping({"tokens": ["a", "b"], "scale": "none", **data})
    box = Enclosure(spec, build_model(spec))
    assert typed(parse_numeral("0.25")) == (Fraction(49, 200), Fraction(51, 200))
    assert typed(parse_numeral("1/3")) == (Fraction(1, 3), Fraction(1, 3))
    # the typed values, and points of the box (a test of soundness: the checker never samples)
    rng = random.Random(5)
    intervals = {k: [[typed(parse_numeral(x)) for x in row] for row in m] for k, m in data.items()}
    for trial in range(12):
        pick = (
            (lambda lo, hi: (lo + hi) / 2)
            if trial == 0
            else (lambda lo, hi: lo + (hi - lo) * Fraction(rng.randint(0, 1000), 1000))
        )
        point = {k: [[pick(*x) for x in row] for row in m] for k, m in intervals.items()}
        S, _, E, sums, A, O = ind.head(point["Q"], point["K"], point["V"], Fraction(1))
        for name, M in (("scores", S), ("exp", E), ("weights", A), ("output", O)):
            for i in range(2):
                for j in range(2):
                    low, high = box.at(name, i, j)
                    assert low <= M[i][j] <= high, (name, i, j)
        assert all(box.at("exp_sum", i, 0)[0] <= sums[i] <= box.at("exp_sum", i, 0)[1] for i in range(2))
    # the scores' enclosure is tight: the corners reach it (0.3 is 0.25..0.35, the integer 2 is 1.5..2.5)
    assert box.at("scores", 0, 0) == (
        Fraction(25, 100) * Fraction(5, 100) + Fraction(-125, 100) * Fraction(25, 10),
        Fraction(35, 100) * Fraction(15, 100) + Fraction(-115, 100) * Fraction(15, 10),
    )


def projected_notebook(seed: int):
    """X and the W printed to 4 decimals, as a notebook prints its tensors; Q, K, V and the outputs claimed
    from the true values (d_k = 4: 1/√4 exact)."""
    rng = random.Random(seed)

    def draw(rows, cols):
        return [[Fraction(rng.randint(-(10**8), 10**8), 10**8) for _ in range(cols)] for _ in range(rows)]

    X, W = draw(3, 3), {k: draw(3, 4) for k in ("W_Q", "W_K", "W_V")}
    Q, K, V = (ind.matmul(X, W[k]) for k in ("W_Q", "W_K", "W_V"))
    _, Z, _, _, A, O = ind.head(Q, K, V, Fraction(1, 2))
    claims = {n: [[ind.text(x, 4) for x in row] for row in M] for n, M in (("Q", Q), ("weights", A), ("output", O))}
    printed = {k: [[ind.text(x, 4) for x in row] for row in M] for k, M in [("X", X), *W.items()]}
    return {"tokens": TOKENS[:3], **printed}, claims, X, W


def test_projected_inputs_are_rounded_too():
    inputs, claims, X, W = projected_notebook(11)
    plain = verdicts(check(None, {**inputs, "claims": claims}))
    flagged = {k for k, v in plain.items() if v in ("wrong", "last-digit")}
    assert len(flagged) == 7 and any(k.startswith("Q[") for k in flagged)
    rounded = check(None, {**inputs, "inputs": "rounded", "claims": claims})
    got = verdicts(rounded)
    assert {k for k, v in got.items() if v == "input-rounding"} == flagged
    assert rounded.ok
    named = {f"{v.claim.quantity}[{v.claim.row + 1}][{v.claim.col + 1}]": v.rounded_inputs for v in rounded.results}
    q = next(k for k in sorted(flagged) if k.startswith("Q["))
    assert named[q] == (f"X[{q[2]}]", f"W_Q[:,{q[5]}]")
    o = next(k for k in sorted(flagged) if k.startswith("output["))
    assert named[o] == (f"X[{o[7]}]", "W_Q", "W_K", f"W_V[:,{o[10]}]")
    # a real slip in Q stays wrong
    claims["Q"][0][0] = ind.text(Fraction(claims["Q"][0][0]) + Fraction(1, 100), 4)
    assert verdicts(check(None, {**inputs, "inputs": "rounded", "claims": claims}))["Q[1][1]"] == "wrong"


def test_projected_enclosures_hold_the_true_values():
    inputs, _, X, W = projected_notebook(11)
    spec = spec_from_mapping({**inputs, "inputs": "rounded"})
    from symattn.exact.factory import build

    box = Enclosure(spec, build(spec))
    Q, K, V = (ind.matmul(X, W[k]) for k in ("W_Q", "W_K", "W_V"))
    S, _, _, _, A, O = ind.head(Q, K, V, Fraction(1, 2))
    for name, M in (("Q", Q), ("K", K), ("V", V), ("scores", S), ("weights", A), ("output", O)):
        for i in range(3):
            for j in range(len(M[0])):
                low, high = box.at(name, i, j)
                assert low <= M[i][j] <= high, (name, i, j)


def test_the_spec_key():
    with pytest.raises(SpecError) as info:
        spec_from_mapping({"tokens": ["a"], "Q": [["1"]], "K": [["1"]], "V": [["1"]], "inputs": "approx"})
    assert str(info.value) == "<dict>: inputs: expected one of 'exact', 'rounded', got 'approx'"
    two = {"tokens": ["a"], "Q": [["1", "2"]], "K": [["1", "2"]], "V": [["1", "2"]], "heads": 2, "inputs": "rounded"}
    with pytest.raises(SpecError) as info:
        check(None, {**two, "claims": {"h1.scores[1][1]": "1"}})
    assert str(info.value) == (
        '<dict>: inputs: "rounded" is checked for one head, with Q, K and V given or projected from X '
        "(not several heads or W_O)"
    )


def tiled_notebook(seed: int, block: int = 2):
    """The printed inputs and the online softmax's claims (block_keys = 2) and each row's LSE, all from the
    true inputs: m, the rescale, l and acc after each block, to 4 decimals."""
    import mpmath

    rng = random.Random(seed)
    true = {k: [[Fraction(rng.randint(-2 * 10**8, 2 * 10**8), 10**8) for _ in range(4)] for _ in TOKENS] for k in "QKV"}
    _, Z, E, sums, _, _ = ind.head(true["Q"], true["K"], true["V"], Fraction(1, 2))
    claims: dict = {"running_max": [], "rescale": [], "running_sum": [], "accumulator": []}
    for b in range(len(TOKENS) // block):
        seen = range((b + 1) * block)
        rows = {name: [] for name in claims}
        for z in Z:
            m = max(z[k] for k in seen)
            old = max(z[k] for k in range(b * block)) if b else None
            rows["running_max"].append(ind.text(m, 4))
            rows["rescale"].append(ind.text(ind.exp(old - m) if b else Fraction(0), 4))
            terms = [ind.exp(z[k] - m) for k in seen]
            rows["running_sum"].append(ind.text(sum(terms, Fraction(0)), 4))
            acc = [sum((t * true["V"][k][c] for t, k in zip(terms, seen)), Fraction(0)) for c in range(4)]
            rows["accumulator"].append([ind.text(x, 4) for x in acc])
        for name in claims:
            claims[name].append(rows[name])
    mpmath.mp.dps = 60
    claims["lse"] = [ind.text(Fraction(str(mpmath.log(mpmath.mpf(s.numerator) / s.denominator))), 4) for s in sums]
    printed = {k: [[ind.text(x, 4) for x in row] for row in M] for k, M in true.items()}
    return {"tokens": TOKENS, "block_keys": block, **printed}, claims


def test_rounded_inputs_explain_the_online_softmaxs_numbers_and_the_lse():
    inputs, claims = tiled_notebook(5)
    plain = check(None, {**inputs, "claims": claims})
    flagged = [(v.claim.key, v.claim.row, v.claim.col) for v in plain.results if v.verdict in ("wrong", "last-digit")]
    rounded = check(None, {**inputs, "inputs": "rounded", "claims": claims})
    got = [(v.claim.key, v.claim.row, v.claim.col) for v in rounded.results if v.verdict == "input-rounding"]
    assert got == flagged and rounded.ok
    # rows: running_max's and running_sum's block (the column: the query); the accumulator's b·n + i; lse's
    # query, last: the LSE follows the tiles it is made of
    explained = [
        (v.claim.quantity, v.claim.row, v.claim.col, v.rounded_inputs)
        for v in rounded.results
        if v.verdict == "input-rounding"
    ]
    assert explained[:4] + explained[-1:] == [
        ("running_max", 0, 0, ("Q[1]", "K")),
        ("running_max", 0, 2, ("Q[3]", "K")),
        ("running_sum", 1, 2, ("Q[3]", "K")),
        ("accumulator", 2, 1, ("Q[3]", "K", "V[:,2]")),
        ("lse", 3, None, ("Q[4]", "K")),
    ]
    assert len(got) == 11
    # a slip of more than the inputs' rounding stays wrong
    claims["running_sum"][1][2] = ind.text(Fraction(claims["running_sum"][1][2]) + Fraction(1, 100), 4)
    claims["lse"][3] = ind.text(Fraction(claims["lse"][3]) - Fraction(1, 100), 4)
    slipped = check(None, {**inputs, "inputs": "rounded", "claims": claims})
    assert [(v.claim.quantity, v.claim.row, v.verdict) for v in slipped.results if v.verdict == "wrong"] == [
        ("running_sum", 1, "wrong"),
        ("lse", 3, "wrong"),
    ]


def test_a_last_digit_on_the_online_softmax_is_decided_without_rounded_inputs():
    # cutting the exact value gives the claim: decided on the enclosure's exact binary ends
    inputs, claims = tiled_notebook(5)
    plain = check(None, {**inputs, "claims": claims})
    decided = [(v.claim.quantity, v.truncated) for v in plain.results if v.verdict == "last-digit"]
    assert decided[:2] + decided[-1:] == [("running_max", True), ("running_max", False), ("lse", False)]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"qk_norm": True}, '<dict>: inputs: inputs = "rounded" is not supported with QK-norm yet'),
        ({"rope": True}, '<dict>: inputs: inputs = "rounded" is not supported with RoPE yet'),
        (
            {"rope": True, "rope_frequencies": ["30deg", "pi/6"]},
            '<dict>: inputs: inputs = "rounded" is not supported with RoPE yet',
        ),
    ],
)
def test_the_parts_rounded_inputs_do_not_cover_refuse_in_one_line(extra, message):
    inputs, _ = notebook(3)
    with pytest.raises(SpecError) as caught:
        check(None, {**inputs, **extra, "inputs": "rounded", "claims": {"scores[1][1]": "0.1"}})
    assert str(caught.value) == message


def test_rounded_inputs_explain_partial_products():
    # the terms q_it·k_jt and p_ij·v_jc of the true inputs, printed to 4 decimals, against the printed inputs
    rng = random.Random(3)
    true = {k: [[Fraction(rng.randint(-2 * 10**8, 2 * 10**8), 10**8) for _ in range(4)] for _ in TOKENS] for k in "QKV"}
    _, _, _, _, A, _ = ind.head(true["Q"], true["K"], true["V"], Fraction(1, 2))
    printed = {k: [[ind.text(x, 4) for x in row] for row in M] for k, M in true.items()}
    claims = {
        "products.scores[1][2]": [ind.text(q * k, 6) for q, k in zip(true["Q"][0], true["K"][1])],
        "products.output[2][3]": [ind.text(A[1][j] * true["V"][j][2], 6) for j in range(4)],
    }
    plain = check(None, {"tokens": TOKENS, **printed, "claims": claims})
    rounded = check(None, {"tokens": TOKENS, **printed, "inputs": "rounded", "claims": claims})
    assert [(v.claim.term, v.verdict) for v in plain.results] == [
        (0, "wrong"),
        (1, "wrong"),
        (2, "last-digit"),
        (3, "wrong"),
        (0, "wrong"),
        (1, "wrong"),
        (2, "last-digit"),
        (3, "last-digit"),
    ]
    assert (
        rounded.ok
        and [v.rounded_inputs for v in rounded.results] == [("Q[1]", "K[2]")] * 4 + [("Q[2]", "K", "V[:,3]")] * 4
    )
    # a slip of more than the inputs' rounding stays wrong
    claims["products.scores[1][2]"][0] = ind.text(Fraction(claims["products.scores[1][2]"][0]) + Fraction(1, 100), 4)
    assert (
        check(None, {"tokens": TOKENS, **printed, "inputs": "rounded", "claims": claims}).results[0].verdict == "wrong"
    )
