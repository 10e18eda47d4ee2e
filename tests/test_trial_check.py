"""What a teacher's trial of check found (issue 32): one number claimed under two names, an explanation with
nothing left of its "=" (a cos or sin given or looked up)."""

import json
import re
import shutil

import pytest

from symattn.checking.checker import check
from symattn.cli.commands import main
from symattn.input import builtin
from symattn.input.errors import SpecError
from symattn.input.messages import messages_in
from symattn.rendering.renderer import render_report

MLA_HEADS = builtin.example_path("mla-heads", "en")


def test_a_shared_latent_claimed_under_two_names_is_refused_in_one_line(tmp_path, capsys):
    claims = tmp_path / "c.toml"
    claims.write_text(
        f'spec = "{_beside(tmp_path, MLA_HEADS)}"\n[claims]\n"latent[1][1]" = "1"\n"h2.latent[1][1]" = "5"\n',
        encoding="utf-8",
    )
    assert main(["check", str(claims)]) == 2
    assert capsys.readouterr() == (
        "",
        f"symattn: {claims}: claims.h2.latent[1][1]: the same entry as claims.latent[1][1] (both keys name one"
        " number); claim it once\n",
    )


@pytest.mark.parametrize(
    "lang, message",
    [
        ("en", "the same entry as claims.h1.latent[3][2] (both keys name one number); claim it once"),
        ("zh", "与 claims.h1.latent[3][2] 是同一项（两个键指同一个数）；只声明一次"),
    ],
)
def test_two_heads_name_one_latent_in_both_languages(lang, message):
    with messages_in(lang), pytest.raises(SpecError) as info:  # a whole row of h1, one entry of h2
        check(MLA_HEADS, {"claims": {"h1.latent[3]": ["1.5", "0.5"], "h2": {"latent[3][2]": "0.5"}}})
    assert str(info.value) == f"<dict>: claims.h2.latent[3][2]: {message}"


def test_one_name_may_claim_an_entry_twice_and_other_entries_pass():
    report = check(MLA_HEADS, {"claims": {"latent[1]": ["1.5", "0.5"], "h2.latent[2][1]": "0.5", "latent[1][1]": "2"}})
    assert [(v.claim.key, v.claim.row, v.claim.col, v.verdict) for v in report.results] == [
        ("claims.latent[1]", 0, 0, "exact"),
        ("claims.latent[1][1]", 0, 0, "rounded"),
        ("claims.latent[1]", 0, 1, "exact"),
        ("claims.h2.latent[2][1]", 1, 0, "exact"),
    ]


TABLES = {  # cos and sin given as tables: no angle, nothing to compute
    "tokens": ["I", "like", "tea"],
    "Q": [[1, 0], [0, 1], [1, 1]],
    "K": [[1, 0], [1, 1], [0, 1]],
    "V": [[1, 0], [0, 1], [1, 1]],
    "rope": True,
    "rope_cos": [[1], ["0.5"], ["0.6"]],
    "rope_sin": [[0], ["0.8"], ["0.8"]],
}
ANGLES = {**TABLES, "rope_frequencies": ["30deg"]}
del ANGLES["rope_cos"], ANGLES["rope_sin"]


@pytest.mark.parametrize(
    "lang, lines",
    [
        (
            "en",
            [
                "    exact 1/2 = 0.5; correctly rounded: 0.5",  # given in the table
                "    exact 1; correctly rounded: 1",  # cos 0 (angles): its closed form is its value
                "    exact sqrt(3)/2 ≈ 0.866025; correctly rounded: 0.9",  # cos 30°
            ],
        ),
        (
            "zh",
            [
                "    精确值 1/2 = 0.5；正确舍入：0.5",
                "    精确值 1；正确舍入：1",
                "    精确值 sqrt(3)/2 ≈ 0.866025；正确舍入：0.9",
            ],
        ),
    ],
)
def test_a_given_or_looked_up_cos_is_explained_as_a_sentence(lang, lines):
    given = check({**TABLES, "lang": lang}, {"claims": {"rope_cos[2][1]": "0.4"}})
    turned = check({**ANGLES, "lang": lang}, {"claims": {"rope_cos[1][1]": "2", "rope_cos[2][1]": "0.8"}})
    text = render_report(given, "text") + render_report(turned, "text")
    assert re.findall(r"^    \S.*$", text, re.MULTILINE) == lines  # the explanations: indented by four


def test_a_given_cos_in_markdown_and_latex():
    report = check(TABLES, {"claims": {"rope_cos[2][1]": "0.4"}})
    assert "$$\n\\text{exact}\\, \\frac{1}{2} = 0.5\n$$\n\ncorrectly rounded: 0.5" in render_report(report, "markdown")
    assert "\\[\n\\text{exact}\\, \\frac{1}{2} = 0.5\n\\]\n" in render_report(report, "latex")


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_looked_up_cos_passes_katex_and_tex(katex, latex, tmp_path, lang):
    claims = {"rope_cos[1][1]": "2", "rope_cos[2][1]": "0.8"}
    if lang == "en":  # and angles claimed as multiples of π (in zh, an unsplit claim as wide as -100 overflows
        claims |= {"rope_angle[3][1]": "-pi/3", "rope_angle[2][1]": "pi/6"}  # this table already: not theirs)
    report = check({**ANGLES, "lang": lang}, {"claims": claims})
    assert katex(render_report(report, "markdown")) == []
    latex(render_report(report, "latex", standalone=True), "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert re.findall(r"Overfull \\[hv]box", log) == []


DEGREES = {  # the document shows φ = π/2 and 3π/4: the claims may say so
    "tokens": ["a", "b", "c", "d"],
    "Q": [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 1]],
    "K": [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 1]],
    "V": [[1, 0], [0, 1], [1, 1], [2, 0]],
    "rope": True,
    "rope_frequencies": ["90deg", "45deg"],
}


def test_angles_typed_as_the_document_writes_them_are_judged_exactly(tmp_path, capsys):
    claims = {
        "rope_angle[1][1]": "0deg",
        "rope_angle[2][1]": "pi/2",
        "rope_angle[3][1]": "180°",
        "rope_angle[4][1]": "90deg",  # 3 × 90°: wrong
        "rope_angle[4][2]": "3pi/4",
        "rope_angle[3][2]": "π/2",
    }
    report = check(DEGREES, {"claims": claims})
    assert [(v.claim.key, v.verdict, str(v.closed_form)) for v in report.results] == [
        ("claims.rope_angle[1][1]", "exact", "0"),
        ("claims.rope_angle[2][1]", "exact", "pi/2"),
        ("claims.rope_angle[3][1]", "exact", "pi"),
        ("claims.rope_angle[3][2]", "exact", "pi/2"),
        ("claims.rope_angle[4][1]", "wrong", "3*pi/2"),
        ("claims.rope_angle[4][2]", "exact", "3*pi/4"),
    ]
    (tmp_path / "s.json").write_text(json.dumps(DEGREES), encoding="utf-8")
    path = tmp_path / "c.toml"
    path.write_text('spec = "s.json"\n[claims]\n"rope_angle[2][1]" = "pi/2"\n"rope_angle[4][2]" = "3pi/4"\n', "utf-8")
    assert main(["check", str(path)]) == 0
    assert "exact: 2" in capsys.readouterr().out
    latex = render_report(report, "latex")
    assert "& \\(3\\pi/4\\) &" in latex and "& \\(\\pi/2\\) &" in latex  # as claimed


def test_a_claimed_angle_carries_into_its_cos_and_sin():
    claims = {"rope_angle[2][1]": "pi/3", "rope_cos[2][1]": "0.5", "rope_sin[2][1]": "0.866"}
    assert [(v.claim.key, v.verdict) for v in check(DEGREES, {"claims": claims}).results] == [
        ("claims.rope_angle[2][1]", "wrong"),  # π/2
        ("claims.rope_cos[2][1]", "carried"),  # cos(π/3), from their own angle
        ("claims.rope_sin[2][1]", "carried"),
    ]
    radians = {**DEGREES, "rope_frequencies": ["1", "0.5"]}  # an angle of 1 radian is not π
    assert [v.verdict for v in check(radians, {"claims": {"rope_angle[2][1]": "pi"}}).results] == ["wrong"]


@pytest.mark.parametrize(
    "key, text",
    [
        ("rope_angle[2][1]", "pi/0"),
        ("rope_angle[2][1]", "90 degrees"),
        ("rope_angle[2][1]", "pi*pi"),
        ("rope_angle[2][1]", "(pi)/2"),
        ("rope_angle[2][1]", "__import__('os')"),
        ("rope_cos[2][1]", "pi/2"),  # angles only
        ("rope_frequency[1]", "90deg"),
    ],
)
def test_other_text_is_still_not_a_number(key, text):
    with pytest.raises(SpecError) as info:
        check(DEGREES, {"claims": {key: text}})
    assert str(info.value) == f"<dict>: claims.{key}: not a number: {text!r}"
    with messages_in("zh"), pytest.raises(SpecError) as info:
        check(DEGREES, {"claims": {key: text}})
    assert str(info.value) == f"<dict>: claims.{key}: 不是数：{text!r}"


def test_one_unit_off_an_exact_cos_is_wrong_and_off_a_rounded_sine_a_last_digit_slip():
    # a teacher's trial: 0.6 for cos 60° = 1/2 was amber ("last-digit"), though nothing rounds on its way
    spec = {
        "tokens": ["a", "b"],
        "Q": [["1", "0"], ["0", "1"]],
        "K": [["1", "0"], ["0", "1"]],
        "V": [["1", "0"], ["0", "1"]],
        "rope": True,
        "rope_frequencies": ["60deg"],
    }
    claims = {"rope_cos[2][1]": "0.6", "rope_cos[1][1]": "1", "rope_sin[2][1]": "0.867", "Q_rot[2][1]": "-0.867"}
    report = check(None, {**spec, "claims": claims})
    assert [(r.claim.key, r.verdict) for r in report.results] == [
        ("claims.rope_cos[1][1]", "exact"),
        ("claims.rope_cos[2][1]", "wrong"),
        ("claims.rope_sin[2][1]", "last-digit"),  # √3/2 ≈ 0.866: a rounding lies on its way
        ("claims.Q_rot[2][1]", "carried"),
    ]


def _beside(folder, spec) -> str:
    """The example spec copied beside the claims file, named as a claims file names its spec: a plain name."""
    shutil.copyfile(spec, folder / spec.name)
    return spec.name
