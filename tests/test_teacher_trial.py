"""What a teacher's trial of check, grade and the derivation found (issue 32's variants in class)."""

from symattn.checking.checker import check
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render_report

TILE = {
    "title": "Online softmax, one key at a time",
    "tokens": ["sun", "rain", "wind", "snow"],
    "Q": [[1, 0], ["0.5", 1], [1, 1], [0, 2]],
    "K": [[1, 1], [0, 1], [2, 0], [1, -1]],
    "V": [[4, 0], [0, 2], [2, 2], [1, 3]],
    "rope": True,
    "rope_frequencies": ["60deg"],
    "block_keys": 1,
}
# the trial's running sums and accumulators of "snow": each carried from the claimant's own numbers before it
TRIAL = (  # block by block: running max m, rescale, running sum l, accumulator acc
    ("-1.414", "0", "1", ["4", "0"]),
    ("-0.707", "0.5", "1.5", ["2", "2"]),
    ("-0.707", "1", "1.675", ["2.350", "2.350"]),
    ("-0.707", "1", "2.168", ["2.843", "3.829"]),
)
BLOCKS = {
    f"{name}[{b}][4]": x
    for b, row in enumerate(TRIAL, 1)
    for name, x in zip(("running_max", "rescale", "running_sum", "accumulator"), row)
}
WEIGHTS = {"weights[4]": ["0.228", "0.463", "0.081", "0.228"]}  # the exact weights rounded


def verdicts(report, quantity: str = "output") -> list[tuple[str, str]]:
    return [(str(v.claim.number.text), v.verdict) for v in report.results if v.claim.quantity == quantity]


# --- 1. a tiled output is carried from the claimant's own acc / l ------------------------------------------


def test_a_tiled_output_follows_the_claimants_own_accumulator_over_running_sum():
    report = check(load_spec(TILE), {"claims": {**BLOCKS, "output[4][1]": "1.311", "output[4][2]": "1.766"}})
    # 2.843 / 2.168 = 1.3113…, 3.829 / 2.168 = 1.7661…; the exact output is 1.30275…, 1.77186…
    assert verdicts(report) == [("1.311", "carried"), ("1.766", "carried")]
    assert "Nothing to fix" in render_report(report, "text")
    # one unit off their own acc / l is a rounding slip of theirs; further off is wrong
    slips = check(load_spec(TILE), {"claims": {**BLOCKS, "output[4][1]": "1.312", "output[4][2]": "1.760"}})
    assert verdicts(slips) == [("1.312", "last-digit"), ("1.760", "wrong")]
    assert "  output (snow, column 1): 1.312 — last-digit\n" in render_report(slips, "text")


def test_a_tiled_output_follows_the_claimants_weights_too():
    # both routes at once: the weights give 1.302, their acc / l 1.311; each is theirs
    for output in ("1.302", "1.311"):
        report = check(load_spec(TILE), {"claims": {**BLOCKS, **WEIGHTS, "output[4][1]": output}})
        assert verdicts(report) == [(output, "carried")]
    # the weights alone (no acc or l claimed): the weights' route only
    alone = check(load_spec(TILE), {"claims": {**WEIGHTS, "output[4][1]": "1.302", "output[4][2]": "1.766"}})
    assert verdicts(alone) == [("1.302", "carried"), ("1.766", "wrong")]


def test_without_block_keys_the_output_is_the_weights_route_alone():
    spec = {k: v for k, v in TILE.items() if k != "block_keys"}
    report = check(load_spec(spec), {"claims": {**WEIGHTS, "output[4][1]": "1.311"}})
    assert verdicts(report) == [("1.311", "wrong")]


# --- 2. MLA: an output from either route's own numbers is carried -----------------------------------------

MLA = {
    "title": "MLA lesson: two heads, decoupled RoPE",
    "tokens": ["ice", "melts", "fast", "today"],
    "focus": "fast",
    "heads": 2,
    "mla_route": "absorbed",
    "rope": True,
    "rope_frequencies": ["90deg"],
    "mla": {
        "X": [[1, 0, 2], [0, 1, -1], [1, 1, 0], [2, 0, 1]],
        "W_DKV": [["0.5", 0], [0, 1], [1, "0.5"]],
        "W_UK": [[1, 0], [0, -1]],
        "W_UV": [[2, 0, 1, 0], [0, 1, 1, -1]],
        "W_Q": [[1, 0], [0, 1], ["0.5", "0.5"]],
        "W_QR": [[1, 0, 0, 1], [0, 1, 1, 0], [0, 0, 0, 0]],
        "W_KR": [[0, 1], [1, 0], [1, 1]],
    },
}
MLA_ROW = {
    "absorbed_query": ["1", "0"],
    "scores": ["-2.5", "-2", "2.6", "0"],
    "scaled": ["-1.443", "-1.155", "1.501", "0"],
    "exp": ["0.236", "0.315", "4.486", "1.000"],
    "exp_sum": "6.037",
    "weights": ["0.039", "0.052", "0.743", "0.166"],
    "latent_output": ["0.823", "0.891"],
}
MLA_LATENT = {"h1.latent[3][1]": "0.6", "h1.latent[3][2]": "1.0", "h1.V[3][1]": "1.2", "h1.V[3][2]": "1.0"}


def mla_claims(output: str) -> dict:
    return {"claims": {**MLA_LATENT, "h1": {"rows": {"fast": {**MLA_ROW, "output": [output, "0.891"]}}}}}


def test_an_mla_output_from_the_claimants_weights_and_v_is_carried_beside_u():
    # their weights × their V (from their latent 0.6): 1.647; their u × W_UV: 2 × 0.823 = 1.646
    for output in ("1.647", "1.646"):
        report = check(load_spec(MLA), mla_claims(output))
        assert verdicts(report) == [(output, "carried"), ("0.891", "carried")]
        assert "output of head 1 (fast, column 1)" not in render_report(report, "text").split("What went wrong")[-1]
    off = check(load_spec(MLA), mla_claims("1.649"))  # two off the one route, three off the other
    assert verdicts(off) == [("1.649", "wrong"), ("0.891", "carried")]
    for slip in ("1.645", "1.648"):  # one off either route's own number: a rounding slip of theirs
        text = render_report(check(load_spec(MLA), mla_claims(slip)), "text")
        assert f"  output of head 1 (fast, column 1): {slip} — last-digit\n" in text
