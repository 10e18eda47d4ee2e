"""Claims on MLA with two heads (issue 32, the teacher's and the author's trials): the one latent c_KV is claimed
without a head (``h2.latent`` names the same matrix), and every place is named in the claim's own matrix:
``h2.Q[3][3]`` is column 3 of head 2's Q, beside ``h2.Q_rot[3][2]`` at column 2 of head 2's Q′."""

import pytest

from symattn.checking.checker import check
from symattn.input import builtin
from symattn.input.errors import SpecError
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render_report

HEADS = builtin.example_path("mla-heads", "en")  # two heads, d_nope = 2 and d_r = 2 each: 4 columns of Q a head


def _report(claims: dict) -> str:
    return render_report(check(load_spec(HEADS), {"claims": claims}), "text")


def test_the_plain_latent_is_claimed_with_two_heads_and_h2_latent_is_the_same_matrix():
    claims = {"latent[3][1]": "1", "h2.latent[1][1]": "2", "h2.K[2][1]": "5"}
    report = check(load_spec(HEADS), {"claims": claims})
    got = [(v.claim.key, v.head, v.row_label, v.col_label, v.verdict) for v in report.results]
    assert got == [
        ("claims.h2.latent[1][1]", None, "the", 1, "rounded"),  # 3/2 to no decimals
        ("claims.latent[3][1]", None, "sat", 1, "exact"),
        ("claims.h2.K[2][1]", 1, "cat", 1, "wrong"),  # after the latent it is made from
    ]
    text = render_report(report, "text")
    assert "2   MLA latent c_KV (sat, column 1) 1         exact         1 = 1\n" in text
    # head 2's K from the one latent (0.5, 1.5 of cat) and its block of W_UK
    assert "  key K of head 2 (cat, column 1): 5 — wrong\n    0.5×0 + 1.5×1 = 1.5; correctly rounded: 2\n" in text


def test_a_claimed_plain_latent_carries_into_every_heads_keys():
    # their c_KV of cat is [0.5, 2.5] (truly [0.5, 1.5]): head 1's K column 1 from it is 0.5×1 + 2.5×1 = 3,
    # head 2's 0.5×0 + 2.5×1 = 2.5
    claims = {"latent[2]": ["0.5", "2.5"], "h2.K[2][1]": "2.5", "h1.K[2][1]": "3"}
    report = check(load_spec(HEADS), {"claims": claims})
    assert [(v.claim.key, v.col_label, v.verdict) for v in report.results] == [
        ("claims.latent[2]", 1, "exact"),
        ("claims.latent[2]", 2, "wrong"),
        ("claims.h1.K[2][1]", 1, "carried"),
        ("claims.h2.K[2][1]", 1, "carried"),
    ]


def test_a_quantity_of_one_head_is_still_refused_without_its_head():
    with pytest.raises(SpecError) as info:
        check(load_spec(HEADS), {"claims": {"absorbed_query[3][1]": "1"}})
    message = "claims.absorbed_query[3][1]: absorbed_query is claimed per head: h1.absorbed_query to h2.absorbed_query"
    assert str(info.value) == "<dict>: " + message


def test_places_are_named_in_the_claims_own_matrix():
    text = _report({"h2.Q[3][3]": "9", "h2.Q_rot[3][2]": "9", "h2.K[3][4]": "9", "h2.V[1][2]": "9"})
    lines = [line for line in text.splitlines() if line[:1].isdigit()]
    assert lines == [
        "1   query Q of head 2 (sat, column 3)          9         wrong         1 = 1",
        "2   key K of head 2 (sat, column 4)            9         wrong         1 = 1",
        "3   value V of head 2 (the, column 2)          9         wrong         1.5 = 3/2",
        "4   rotated query Q' of head 2 (sat, column 2) 9         wrong         1 = 1",
    ]
    # the explanation takes head 2's decoupled column of W_QR: X's row of sat by its column 1
    assert "  query Q of head 2 (sat, column 3): 9 — wrong\n    1×0 + 1×1 + 0×1 = 1; correctly rounded: 1\n" in text


def test_the_json_report_names_the_head_and_its_column():
    report = check(load_spec(HEADS), {"claims": {"h2.Q[3][3]": "1"}})
    (claim,) = report.data()["claims"]
    assert (claim["quantity"], claim["head"], claim["row"], claim["col"], claim["verdict"]) == (
        "Q",
        2,
        "sat",
        3,
        "exact",
    )


def test_fix_first_names_the_latent_that_the_wrong_keys_come_from():
    spec = load_spec(builtin.example_path("mla", "en"))
    report = check(spec, {"claims": {"scores[3][1]": "9", "latent[1][1]": "7", "K[1][1]": "5"}})
    assert [v.claim.quantity for v in report.results] == ["latent", "K", "scores"]
    assert render_report(report, "text").splitlines()[-1] == (
        "  Fix first: MLA latent c_KV (the, column 1) is given as 7 but should be 2 (later mistakes may follow from it)."
    )
