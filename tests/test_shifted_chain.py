"""The `shifted` chain (z − max) carries from the claimant's own maximum of their own scaled row (issue 28)."""

from decimal import Decimal

from symattn.checking.checker import check

SPEC = """tokens = ["a", "b"]
Q = [[1, 0], [0, 1]]
K = [[1, 0], [0, 1]]
V = [[1, 0], [0, 1]]
scale = "1/2"
softmax = "stable"
"""


def outcomes(tmp_path, claims: str, spec: str = SPEC):
    (tmp_path / "s.toml").write_text(spec, encoding="utf-8")
    (tmp_path / "c.toml").write_text('spec = "s.toml"\n[claims]\n' + claims, encoding="utf-8")
    report = check(None, str(tmp_path / "c.toml"))
    return [(f"{v.claim.quantity}[{v.claim.row}][{v.claim.col}]", v.verdict, v.carried) for v in report.results]


def test_a_whole_claimed_row_subtracts_its_own_largest_number(tmp_path):
    # the exact row is [0.5, 0]: the student's [0.12, 0.60] has its maximum at the other key
    got = outcomes(tmp_path, "scaled = [[0.12, 0.60], [0, 0.5]]\nshifted = [[-0.48, 0.00], [-0.5, 0]]\n")
    assert got[4:6] == [
        ("shifted[0][0]", "carried", Decimal("-0.48")),
        ("shifted[0][1]", "carried", Decimal("0.00")),
    ]


def test_a_partly_claimed_row_takes_the_largest_of_claimed_and_implied(tmp_path):
    # scaled[1][1] is not claimed: its exact 0.5 is below the claimed 0.60, which is the maximum
    got = outcomes(tmp_path, '"scaled[1][2]" = 0.60\n"shifted[1][1]" = -0.10\n')
    assert got[1] == ("shifted[0][0]", "carried", Decimal("-0.10"))


def test_an_implied_entry_above_the_claimed_ones_is_the_maximum(tmp_path):
    # the exact 0.5 of scaled[1][1] (not claimed) is above the claimed 0.25
    got = outcomes(tmp_path, '"scaled[1][2]" = 0.25\n"shifted[1][2]" = -0.25\n')
    assert got[1] == ("shifted[0][1]", "carried", Decimal("-0.25"))


def test_a_sink_above_the_claimed_row_is_the_maximum(tmp_path):
    spec = SPEC + 'sinks = ["1"]\n'
    claims = "scaled = [[0.12, 0.60], [0, 0.5]]\nshifted = [[-0.88, -0.40], [-1, -0.5]]\nexp = [[0.415, 0.670]]\n"
    got = outcomes(tmp_path, claims.replace("exp = [[0.415, 0.670]]", '"exp[1][1]" = 0.415\n"exp[1][2]" = 0.670'), spec)
    assert [g for g in got if g[1] != "exact" and g[0].startswith(("shifted", "exp"))] == [
        ("shifted[0][0]", "carried", Decimal("-0.88")),
        ("shifted[0][1]", "carried", Decimal("-0.40")),
        ("exp[0][0]", "carried", Decimal("0.415")),
        ("exp[0][1]", "carried", Decimal("0.670")),
    ]
