"""Asked decimals: a claim with fewer decimals than the claims file (or the sheet) asks for is ``too-coarse``.

The hand chains here are computed independently with 50-digit decimals, not by the checker.
"""

import decimal
import shutil
from decimal import Decimal
from fractions import Fraction

import pytest

from symattn.checking.checker import check
from symattn.checking.report import report_data
from symattn.classroom import exercises as ex
from symattn.classroom import sheets
from symattn.classroom.grading import grade, read_policy
from symattn.cli.commands import main
from symattn.input.errors import SpecError
from symattn.rendering.renderer import render_report

from .test_exercise import HOMEWORK, key_numbers
from .test_grade import fill

IDS = ["s01", "s02", "s03", "s04"]
INPUTS = {
    "tokens": ["a", "b", "c"],
    "Q": [["1", "0"], ["0", "1"], ["1", "1"]],
    "K": [["1", "0"], ["0", "1"], ["1", "1"]],
    "V": [["1", "2"], ["3", "4"], ["5", "6"]],
}


def places(x: Decimal, n: int) -> Decimal:
    return x.quantize(Decimal(1).scaleb(-n), rounding=decimal.ROUND_HALF_UP)


def hand_chain(v, scaled_decimals: int) -> dict[str, str]:
    """A student's numbers: the key's scores and scaled scores at ``scaled_decimals``, then each
    later step carried exactly from their own numbers and rounded as the sheet asks (weights 3, output 1)."""
    right = key_numbers(v)
    with decimal.localcontext(decimal.Context(prec=50)):
        root = Decimal(v.spec.d_k).sqrt()
        scores = [Decimal(right[f"scores[3][{j}]"]) for j in (1, 2, 3)]
        scaled = [places(s / root, scaled_decimals) for s in scores]
        exps = [z.exp() for z in scaled]
        weights = [places(e / sum(exps), 3) for e in exps]
        V = [[Decimal(x.text) for x in row] for row in v.spec.V]
        out = [places(sum(w * V[j][k] for j, w in enumerate(weights)), 1) for k in (0, 1)]
    numbers = {k: x for k, x in right.items() if k.startswith("scores")}
    numbers.update({f"scaled[3][{j + 1}]": format(z, "f") for j, z in enumerate(scaled)})
    numbers.update({f"weights[3][{j + 1}]": format(w, "f") for j, w in enumerate(weights)})
    numbers.update({f"output[3][{k + 1}]": format(o, "f") for k, o in enumerate(out)})
    return numbers


@pytest.fixture(scope="module")
def returned(tmp_path_factory):
    """s01 at the asked decimals (the key), s02 with more (5 for the scaled scores), s03 with the scaled
    scores to 1 decimal and every later step carried correctly from them, s04 like s03 but to 2."""
    out = tmp_path_factory.mktemp("class")
    assert main(["exercise", str(HOMEWORK), "--count", "4", "--seed", "1", "-o", str(out)]) == 0
    v = {x.id: x for x in ex.exercise(HOMEWORK, IDS, 1)}
    folder = tmp_path_factory.mktemp("returned")
    shutil.copy(out / "index.csv", folder / "index.csv")
    shutil.copy(out / "template.toml", folder / "template.toml")
    answers = {"s01": key_numbers(v["s01"]), "s02": hand_chain(v["s02"], 5)}
    answers.update({"s03": hand_chain(v["s03"], 1), "s04": hand_chain(v["s04"], 2)})
    for i, numbers in answers.items():
        (folder / f"{i}.toml").write_text(fill(v[i], numbers), encoding="utf-8")
    return folder, v, answers


def test_the_answers_file_asks_the_sheets_decimals(returned):
    _, v, _ = returned
    assert "\ndecimals = { output = 1, scaled = 3, weights = 3, scores = 2 }\n" in sheets.answers(v["s01"])
    assert sheets.asked_decimals(v["s01"]) == {"scaled": 3, "weights": 3, "output": 1}


def test_rounding_too_early_loses_marks(returned):
    folder, v, answers = returned
    rows = {r.id: r for r in grade(folder).rows}
    assert {i: rows[i].score for i in IDS} == {"s01": 11, "s02": 11, "s03": Fraction(19, 2), "s04": Fraction(19, 2)}
    assert dict(rows["s03"].counts) == {
        "exact": 3,
        "rounded": 2,  # where their carried numbers happen to round as the exact ones do
        "carried": 3,
        "input-rounding": 0,
        "too-coarse": 3,
        "last-digit": 0,
        "wrong": 0,
        "blank": 0,
    }
    assert rows["s03"].first_to_fix == "scaled[3][1]"
    assert dict(rows["s01"].counts)["too-coarse"] == dict(rows["s02"].counts)["too-coarse"] == 0
    # each too-coarse claim names the number it should have been: the key's, at 3 decimals
    coarse = [x for x in rows["s03"].report.results if x.verdict == "too-coarse"]
    assert [(x.claim.key, x.claim.number.text, format(x.expected, "f"), x.asked) for x in coarse] == [
        (f"claims.scaled[3][{j}]", answers["s03"][f"scaled[3][{j}]"], key_numbers(v["s03"])[f"scaled[3][{j}]"], 3)
        for j in (1, 2, 3)
    ]


def test_the_policy_scores_too_coarse(returned, tmp_path):
    folder, _, _ = returned
    policy = tmp_path / "policy.toml"
    policy.write_text('"too-coarse" = 0\n', encoding="utf-8")
    rows = {r.id: r for r in grade(folder, policy=read_policy(policy)).rows}
    assert (rows["s03"].score, rows["s01"].score) == (8, 11)


def test_verdicts_and_the_report():
    claims = {
        "decimals": {"scaled": 3, "percent": 1},
        "claims": {
            "scores[3][3]": "2",
            "scaled[3][1]": "0.7",  # too coarse: 0.707
            "scaled[3][2]": "0.70711",  # more than asked: fine
            "scaled[3][3]": "1.6",  # wrong at its own decimals: wrong, not too coarse
            "exp[3][1]": "2.014",  # e^0.7: carried from the coarse 0.7
            "percent[3][1]": "25%",  # too coarse: 1 decimal of the percentage asked
            "percent[3][2]": "24.8%",
        },
    }
    report = check(None, {**INPUTS, **claims})
    got = {
        v.claim.key.removeprefix("claims."): (v.verdict, None if v.expected is None else format(v.expected, "f"))
        for v in report.results
    }
    assert got == {
        "scores[3][3]": ("exact", "2"),
        "scaled[3][1]": ("too-coarse", "0.707"),
        "scaled[3][2]": ("rounded", "0.70711"),
        "scaled[3][3]": ("wrong", "1.4"),
        "exp[3][1]": ("carried", "2.028"),
        "percent[3][1]": ("too-coarse", "24.8"),
        "percent[3][2]": ("rounded", "24.8"),
    }
    data = report_data(report)
    assert data["summary"]["precision_lost"]["key"] == "claims.scaled[3][1]"
    assert data["summary"]["counts"]["too-coarse"] == 2
    text = render_report(report, "text")
    assert "  scaled S/√d_k (c, a): 0.7 — too coarse (3 decimal places asked)\n" in text
    assert (
        "  The chain lost its precision at scaled S/√d_k (c, a): 0.7 has fewer decimals than the 3 decimal places "
        "asked; the numbers after it that follow from it are counted as carried.\n"
    ) in text
    zh = render_report(check(None, {**INPUTS, "lang": "zh", **claims}), "text")
    assert "精度在缩放后 S/√d_k（c，a）处丢失：0.7 的小数位数少于要求的 3 位；此后由它推出的数记为沿用。" in zh
    assert "位数不足：2" in zh


def test_no_asked_decimals_no_verdict():
    # the spec's display decimals (defaults, or a spec file's) ask nothing; exact claims and
    # shorter copies of the claimant's own precise number are never too coarse
    assert check(None, {**INPUTS, "claims": {"scaled[3][1]": "0.7"}}).results[0].verdict == "rounded"
    exact = check(None, {**INPUTS, "decimals": {"scores": 3}, "claims": {"scores[3][3]": "2"}})
    assert exact.results[0].verdict == "exact"
    copy = {"decimals": {"output": 3}, "claims": {"output[3][1]": "3.0"}}
    copy["claims"]["rows"] = {"c": {"output": ["2.999", "4.000"]}}
    verdicts = [v.verdict for v in check(None, {**INPUTS, **copy}).results if v.claim.key == "claims.output[3][1]"]
    assert verdicts and "too-coarse" not in verdicts
    report = check(INPUTS, {"claims": {"scaled[3][1]": "0.7"}}, asked={"scaled": 2})
    assert (report.results[0].verdict, format(report.results[0].expected, "f")) == ("too-coarse", "0.71")


def test_decimals_next_to_a_spec_file(tmp_path):
    (tmp_path / "spec.toml").write_text(
        'tokens = ["a", "b"]\nQ = [["1", "0"], ["0", "1"]]\nK = [["1", "0"], ["0", "1"]]\n'
        'V = [["1", "2"], ["3", "4"]]\ndecimals = { scaled = 1 }\n',
        encoding="utf-8",
    )
    claims = tmp_path / "claims.toml"
    claims.write_text('spec = "spec.toml"\n[claims]\n"scaled[1][1]" = "0.7"\n', encoding="utf-8")
    assert check(None, str(claims)).results[0].verdict == "rounded"  # the spec file's decimals ask nothing
    claims.write_text('spec = "spec.toml"\ndecimals = { scaled = 2 }\n[claims]\n"scaled[1][1]" = "0.7"\n')
    assert check(None, str(claims)).results[0].verdict == "too-coarse"
    claims.write_text('spec = "spec.toml"\ndecimals = { scaled = "x" }\n[claims]\n"scaled[1][1]" = "0.7"\n')
    with pytest.raises(SpecError) as info:
        check(None, str(claims))
    assert str(info.value) == f"{claims}: decimals.scaled: expected an integer from 0 to 50, got 'x'"
    claims.write_text('spec = "spec.toml"\nscale = "none"\n[claims]\n"scaled[1][1]" = "0.7"\n')
    with pytest.raises(SpecError) as info:
        check(None, str(claims))
    assert str(info.value) == f'{claims}: scale: give the inputs inline or as spec = "path", not both'
