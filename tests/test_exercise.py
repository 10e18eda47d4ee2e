import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import symattn
from symattn.checking.checker import check
from symattn.classroom import exercises as ex
from symattn.classroom import sheets
from symattn.classroom.template import load_template
from symattn.classroom.variants import draw, failed, variant_seed
from symattn.exact.head_figures import exact_figures, hand_figures
from symattn.exact.heads import build_model
from symattn.input.errors import SpecError
from symattn.input.files import read_table
from symattn.input.spec import load_spec

from .conftest import run_in_terminal

ROOT = Path(__file__).resolve().parent.parent
HOMEWORK = ROOT / "examples" / "homework.toml"


def key_numbers(v):
    """The asked numbers as the key shows them (the hand chain), by claims key."""
    fig = hand_figures(build_model(v.spec), v.spec)
    out = {}
    for a in v.asked:
        if a.quantity == "sqrt_dk":
            num = fig.sqrt_dk
        elif a.quantity == "exp_sum":
            num = fig.exp_sum[a.row]
        else:
            num = getattr(fig, a.quantity)[a.row][a.col]
        out[a.key] = format(num.value, "f")
    return out


def test_variant_seed_is_the_documented_hash():
    import hashlib

    assert variant_seed(1, "s01") == int.from_bytes(hashlib.sha256(b"1:s01").digest()[:8], "big")
    assert variant_seed(1, "s01") == 12775270704000215215


def test_first_variant_exact_numbers():
    (v,) = ex.exercise(HOMEWORK, ["s01"], 1)
    m = v.mapping
    assert m["Q"] == [["-0.2", "-0.4"], ["-0.8", "-0.4"], ["-1.0", "0.4"]]
    assert m["K"] == [["0.3", "-0.6"], ["-0.3", "0.3"], ["-0.6", "0.8"]]
    assert m["V"] == [["0", "2"], ["8", "10"], ["2", "9"]]
    assert [a.key for a in v.asked] == [
        "scores[3][1]",
        "scores[3][2]",
        "scores[3][3]",
        "scaled[3][1]",
        "scaled[3][2]",
        "scaled[3][3]",
        "weights[3][1]",
        "weights[3][2]",
        "weights[3][3]",
        "output[3][1]",
        "output[3][2]",
    ]
    assert v.spec.rounding == "hand"
    assert symattn.exercise(HOMEWORK, ["s01"], 1) == (v,)


def test_different_seed_gives_different_numbers():
    a = ex.exercise(HOMEWORK, ["s01", "s02"], 1)
    b = ex.exercise(HOMEWORK, ["s01", "s02"], 2)
    assert [v.data for v in a] != [v.data for v in b]
    assert a[0].data != a[1].data


def _run_exercise(out: Path, hashseed: str) -> dict[str, bytes]:
    env = dict(os.environ, PYTHONHASHSEED=hashseed)
    subprocess.run(
        [sys.executable, "-m", "symattn", "exercise", str(HOMEWORK), "--count", "3", "--seed", "7", "-o", str(out)],
        check=True,
        env=env,
        cwd=ROOT,
    )
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_same_seed_same_bytes_across_processes(tmp_path):
    first = _run_exercise(tmp_path / "a", "1")
    second = _run_exercise(tmp_path / "b", "12345")
    assert first == second
    assert sorted(first) == [
        "index.csv",
        "key-all.md",
        "s01/answers.toml",
        "s01/key.md",
        "s01/sheet.md",
        "s02/answers.toml",
        "s02/key.md",
        "s02/sheet.md",
        "s03/answers.toml",
        "s03/key.md",
        "s03/sheet.md",
        "template.toml",
    ]


def test_answers_file_is_read_by_check_as_it_is(tmp_path):
    (v,) = ex.exercise(HOMEWORK, ["s01"], 1)
    path = tmp_path / "answers.toml"
    path.write_text(sheets.answers(v), encoding="utf-8")
    report = check(None, str(path))
    assert report.results == ()
    assert report.ok
    assert report.student == "s01"
    assert report.blanks == tuple("claims." + a.key for a in v.asked)
    assert '"weights[3][1]" = ""\n' in sheets.answers(v)
    from symattn.rendering.renderer import render_report

    assert render_report(report, "text").endswith(
        "exact: 0, rounded: 0, carried: 0, last-digit: 0, wrong: 0, blank (not checked): 11\n"
        "  Nothing wrong so far: every number given is exact, correctly rounded, or follows correctly from your "
        "earlier numbers. Still blank: 11.\n"
    )
    assert "- 空白（未核对）：11" in render_report(replace(report, lang="zh"), "markdown")


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2**32), st.sampled_from(["focus", "all"]))
def test_every_draw_suits_hand_work_and_its_key_checks(seed, rows):
    template = load_template(HOMEWORK)
    template = replace(template, answer_rows=rows)
    v = draw(template, seed)
    spec = v.spec
    assert failed(spec, template) is None
    model = build_model(spec)
    # unique largest score in every row, no all-zero row
    for row in model.score_integers[1]:
        assert row.count(max(row)) == 1
    for m in (spec.Q, spec.K, spec.V):
        assert all(any(x.value != 0 for x in r) for r in m)
    shown = sorted(Fraction(w.value) for w in exact_figures(model, spec.decimals).weights[spec.focus])
    assert all(b - a >= Fraction(2, 100) for a, b in zip(shown, shown[1:]))
    # the key, checked as claims against its own variant: exact or rounded (the output by hand: carried)
    report = check(spec, {"claims": key_numbers(v)})
    assert len(report.results) == len(v.asked)
    assert {r.verdict for r in report.results} <= {"exact", "rounded", "carried"}
    assert all(r.verdict in ("exact", "rounded") for r in report.results if r.claim.quantity != "output")


@pytest.mark.parametrize(
    "data, message",
    [
        (
            {"tokens": ["a", "b"], "Q": [[1, 0], [0, 1]], "K": [[1, 0], [0, 1]], "V": [[1, 0], [0, 1]]},
            "<dict>: vary: missing: a template needs a [vary] table that says how numbers are drawn",
        ),
        (
            {"tokens": ["a", "b"], "vary": {"Q": {"range": ["-1", "1"]}, "K": {}, "V": {}}},
            "<dict>: vary.Q.step: missing (e.g. step = 0.1 for one decimal)",
        ),
        (
            {"tokens": ["a", "b"], "vary": {"Q": {"range": ["-1", "1"], "step": "0.3"}}},
            "<dict>: vary.Q.range: low and high must be whole multiples of step",
        ),
        (
            {"tokens": ["a", "b"], "vary": {"Q": {"range": ["1"], "step": "0.1"}}},
            "<dict>: vary.Q.range: expected [low, high], got a list",
        ),
        (
            {"tokens": ["a", "b"], "vary": {"Q": {"range": ["-1", "1"], "step": 0.1}}},
            '<dict>: vary.Q.step: give an exact number (a string such as "0.1"), got the float 0.1',
        ),
        (
            {"tokens": ["a", "b"], "vary": {"Q": {"range": ["-1", "1"], "step": "0.1", "fixed": {"1;2": "0"}}}},
            '<dict>: vary.Q.fixed.1;2: expected "row,column", 1-based, such as "1,2"',
        ),
        (
            {"tokens": ["a", "b"], "vary": {"W": {}}},
            "<dict>: vary.W: unknown key; expected one of Q, K, V, mla, tokens, d_k, d_v, min_gap, tries",
        ),
        (
            {
                "tokens": ["a", "b"],
                "ask": ["weight"],
                "vary": {
                    "Q": {"range": ["-1", "1"], "step": "0.1"},
                    "K": {"range": ["-1", "1"], "step": "0.1"},
                    "V": {"range": ["0", "9"], "step": "1"},
                },
            },
            "<dict>: ask[1]: unknown quantity 'weight'; expected one of sqrt_dk, latent, absorbed_query, scores, scaled, "
            "exp, exp_sum, weights, latent_output, output",
        ),
        (
            {
                "tokens": ["a", "b"],
                "K": [["a", "0"], ["0", "1"]],
                "vary": {"Q": {"range": ["-1", "1"], "step": "0.1"}, "V": {"range": ["0", "9"], "step": "1"}},
            },
            "<dict>: K: exercises need numbers, not symbols (a)",
        ),
    ],
)
def test_bad_templates(data, message):
    with pytest.raises(SpecError) as info:
        ex.exercise(data, ["s01"], 1)
    assert str(info.value) == message


def test_giving_up_names_the_condition():
    data = {
        "tokens": ["a", "b"],
        "vary": {
            "Q": {"range": ["0", "0"], "step": "1"},
            "K": {"range": ["1", "1"], "step": "1"},
            "V": {"range": ["1", "2"], "step": "1"},
            "tries": 5,
        },
    }
    with pytest.raises(SpecError) as info:
        ex.exercise(data, ["s01"], 1)
    assert str(info.value) == (
        "<dict>: vary: no draw suits hand work after 5 tries; most failed: zero-row (5 times); "
        "widen the ranges or change the step"
    )


def test_fixed_entries_and_token_choice():
    data = {
        "vary": {
            "tokens": {"choose": [["a", "b", "c"], ["x", "y", "z"]]},
            "Q": {"range": ["-1", "1"], "step": "0.1", "fixed": {"1,2": "0.5"}},
            "K": {"range": ["-1", "1"], "step": "0.1"},
            "V": {"range": ["0", "9"], "step": "1"},
        }
    }
    for v in ex.exercise(data, [f"s{i}" for i in range(6)], 3):
        assert v.mapping["Q"][0][1] == "0.5"
        assert v.mapping["tokens"] in (["a", "b", "c"], ["x", "y", "z"])


def test_sheet_and_key_in_both_languages():
    (v,) = ex.exercise(HOMEWORK, [("s01", "Ann Lee")], 1)
    sheet = sheets.sheet(v, "markdown")
    assert "Student: Ann Lee (s01)" in sheet
    assert "| 7 | weight $A$ | sat | the | `weights[3][1]` ________ |" in sheet
    zh = sheets.sheet(v, "latex", lang="zh")
    assert zh.startswith("% !TEX program = xelatex\n\\documentclass[a4paper]{ctexart}")
    assert "10 & 输出 & sat & 第 1 列 & \\framebox[6em]{\\strut} \\\\" in zh
    assert "Hand rounding" in sheets.key(v, "markdown")
    assert sheets.key(v, "latex").rstrip().endswith("\\end{document}")


def test_key_all_holds_every_key_under_its_student():
    variants = ex.exercise(HOMEWORK, [("s01", "Ann Lee"), ("s02", "")], 1)
    text = sheets.key_all(variants)
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings[:5] == [
        "# Answer keys of the class: Homework 3: attention by hand",
        "## Answer key of Ann Lee (s01)",
        "### Answers, as the sheet asks for them",
        "### Homework 3: attention by hand",
        "#### Setup",
    ]
    assert headings.count("## Answer key of s02") == 1
    for v in variants:  # each student's own key: the answers, then the derivation one level down
        own = sheets.key(v).splitlines()
        assert [line for line in own if line.startswith("#")][:4] == [
            f"# Answer key of {v.name + ' (' + v.id + ')' if v.name else v.id}",
            "## Answers, as the sheet asks for them",
            "## Homework 3: attention by hand",
            "### Setup",
        ]
    # the boxes of the sheet, answered at the sheet's decimals (the output to 1 decimal, as asked)
    assert sheets.key(variants[0]).splitlines()[4:17] == [
        "| \\# | quantity | row | column | answer |",
        "|---:|---|---|---|---:|",
        "| 1 | score $S$ | sat | the | -0.54 |",
        "| 2 | score $S$ | sat | cat | 0.42 |",
        "| 3 | score $S$ | sat | sat | 0.92 |",
        "| 4 | scaled $S/\\sqrt{d_k}$ | sat | the | -0.382 |",
        "| 5 | scaled $S/\\sqrt{d_k}$ | sat | cat | 0.297 |",
        "| 6 | scaled $S/\\sqrt{d_k}$ | sat | sat | 0.651 |",
        "| 7 | weight $A$ | sat | the | 0.173 |",
        "| 8 | weight $A$ | sat | cat | 0.341 |",
        "| 9 | weight $A$ | sat | sat | 0.486 |",
        "| 10 | output | sat | column 1 | 3.7 |",
        "| 11 | output | sat | column 2 | 8.1 |",
    ]
    assert [str(x.value) for x in sheets.answer_values(variants[0])][9:] == ["3.7", "8.1"]
    assert text.count("#### Step 1:") == 2
    tex = sheets.key_all(variants, "latex", lang="zh")
    assert tex.count("\\clearpage") == 1 and "\\section*{Ann Lee（s01）的参考答案}" in tex
    assert tex.count("\\subsection*{Homework 3: attention by hand}") == 2


@pytest.mark.parametrize("lang, engine", [("en", "pdflatex"), ("zh", "xelatex")])
def test_sheet_key_and_key_all_compile(latex, tmp_path, lang, engine):
    variants = ex.exercise(HOMEWORK, [("s01", "Ann Lee"), ("s02", "")], 1)
    for name, tex in (
        ("sheet", sheets.sheet(variants[0], "latex", lang)),
        ("key", sheets.key(variants[0], "latex", lang)),
        ("key-all", sheets.key_all(variants, "latex", lang)),
    ):
        folder = tmp_path / name
        folder.mkdir()
        assert latex(tex, engine, folder).read_bytes().startswith(b"%PDF-")


def test_progress_bar_only_on_a_terminal(tmp_path):
    """On a terminal (a pty) the batch shows a bar on stderr; piped, nothing is printed at all."""
    argv = [sys.executable, "-m", "symattn", "exercise", str(HOMEWORK), "--count", "3", "-o"]
    piped = subprocess.run(argv + [str(tmp_path / "a")], capture_output=True, text=True, cwd=ROOT)
    assert (piped.returncode, piped.stdout, piped.stderr) == (0, "", "")
    code, text = run_in_terminal(argv + [str(tmp_path / "b")], ROOT)
    assert code == 0
    assert "drawing:   0%" in text and "writing markdown:   0%" in text and "0/3 [" in text
    first = {
        p.relative_to(tmp_path / "a").as_posix(): p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()
    }
    second = {
        p.relative_to(tmp_path / "b").as_posix(): p.read_bytes() for p in (tmp_path / "b").rglob("*") if p.is_file()
    }
    assert first == second  # the bar changes nothing that is written


def test_steps_of_a_long_compute_on_a_terminal(tmp_path):
    """compute, render and check count their steps on a terminal (after SYMATTN_PROGRESS_DELAY seconds)."""
    argv = [sys.executable, "-m", "symattn", "compute", "--no-exact", "-o", str(tmp_path / "c.json")]
    code, text = run_in_terminal(argv, ROOT, {"SYMATTN_PROGRESS_DELAY": "0"})
    assert code == 0 and "compute: 0 steps [" in text  # later counts show as often as tqdm redraws
    code, text = run_in_terminal(
        [sys.executable, "-m", "symattn", "check", "--example", "--lang", "en"], ROOT, {"SYMATTN_PROGRESS_DELAY": "0"}
    )
    assert code == 1 and "check: 0 steps [" in text
    piped = subprocess.run(
        argv, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "SYMATTN_PROGRESS_DELAY": "0"}
    )
    assert (piped.returncode, piped.stderr) == (0, "")


def test_a_class_folder_is_never_written_over_by_mistake(tmp_path, capsys):
    from symattn.cli.commands import main

    out = tmp_path / "class"
    assert main(["exercise", str(HOMEWORK), "--count", "2", "-o", str(out)]) == 0
    answers = out / "s01" / "answers.toml"
    answers.write_text(
        answers.read_text(encoding="utf-8").replace('"scores[3][1]" = ""', '"scores[3][1]" = "0.1"'), encoding="utf-8"
    )
    filled = answers.read_bytes()
    assert main(["exercise", str(HOMEWORK), "--count", "2", "--seed", "5", "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"symattn: {out}: the folder is not empty (it may hold returned answers); "
        "write the class to a new folder, or give --force to write over it\n"
    )
    assert answers.read_bytes() == filled
    assert main(["exercise", str(HOMEWORK), "--count", "2", "--seed", "5", "--force", "-o", str(out)]) == 0
    assert answers.read_bytes() != filled
    (tmp_path / "empty").mkdir()
    assert main(["exercise", str(HOMEWORK), "--count", "1", "-o", str(tmp_path / "empty")]) == 0


def test_class_size_limit(tmp_path, capsys):
    from symattn.cli.commands import main

    assert main(["exercise", str(HOMEWORK), "--count", "1001", "-o", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err == "symattn: --count: expected 1 to 1000, got 1001\n"
    with pytest.raises(SpecError) as info:
        ex.exercise(HOMEWORK, [f"s{i}" for i in range(1001)], 1)
    assert str(info.value) == f"{HOMEWORK}: ids: 1001 students; an exercise has at most 1000"
    assert not (tmp_path / "x").exists()


def test_exercise_pdf_through_the_cli(tmp_path):
    if not (shutil.which("latexmk") and shutil.which("xelatex")):
        pytest.skip("latexmk and xelatex not installed (TeX Live)")
    from symattn.cli.commands import main

    assert (
        main(["exercise", str(HOMEWORK), "--count", "1", "--lang", "zh", "--format", "pdf", "-o", str(tmp_path / "c")])
        == 0
    )
    names = sorted(p.relative_to(tmp_path / "c").as_posix() for p in (tmp_path / "c").rglob("*") if p.is_file())
    assert names == ["index.csv", "key-all.pdf", "s01/answers.toml", "s01/key.pdf", "s01/sheet.pdf", "template.toml"]
    for name in ("key-all.pdf", "s01/key.pdf", "s01/sheet.pdf"):
        assert (tmp_path / "c" / name).read_bytes().startswith(b"%PDF-")
    assert 'lang = "zh"' in (tmp_path / "c" / "s01" / "answers.toml").read_text(encoding="utf-8")


def test_a_tie_is_judged_on_the_biased_scores():
    # d_k = 4, scale 1/2, ALiBi m = 1/2: row 2's plain scores 2 and 1 differ, but z = 2/2 − 1/2 and 1/2 tie
    template = load_template(HOMEWORK)
    tied = {"tokens": ["a", "b"], "alibi_slopes": ["0.5"], "V": [["1", "2"], ["3", "4"]]}
    tied |= {"Q": [["1", "0", "0", "0"], ["0", "1", "0", "0"]], "K": [["1", "2", "0", "0"], ["0", "1", "0", "0"]]}
    assert failed(load_spec(tied), template) == "tie"
    # the plain scores 1 and 1 tie, but z = 1/2 − 1/2 and 1/2 do not
    apart = tied | {"K": [["1", "1", "0", "0"], ["0", "1", "0", "0"]]}
    assert failed(load_spec(apart), template) != "tie"


def masked_homework():
    return dict(read_table(HOMEWORK), mask="causal")


def test_a_masked_sheet_says_what_each_token_attends_to():
    (v,) = ex.exercise(masked_homework(), ["s01"], 1)
    en, zh = sheets.sheet(v, "markdown", "en"), sheets.sheet(v, "markdown", "zh")
    assert (
        "Masked attention: each token attends only to the tokens listed here. Work out every score S as usual; a "
        "masked one becomes $-\\infty$ when scaled (write -inf), and its weight is 0.\n\n"
        "- “the” attends to “the”\n- “cat” attends to “the”, “cat”\n"
        "- “sat” attends to “the”, “cat”, “sat”\n"
    ) in en
    assert "- 「cat」关注「the」、「cat」\n" in zh
    assert "attends" not in sheets.sheet(ex.exercise(HOMEWORK, ["s01"], 1)[0], "markdown", "en")


@pytest.mark.parametrize("lang, engine", [("en", "pdflatex"), ("zh", "xelatex")])
def test_a_masked_sheet_compiles_with_its_list(latex, tmp_path, lang, engine):
    (v,) = ex.exercise(masked_homework(), ["s01"], 1)
    pdf = latex(sheets.sheet(v, "latex", lang), engine, tmp_path)
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert ("“sat” attends to “the”, “cat”, “sat”" if lang == "en" else "「sat」关注「the」、「cat」、「sat」") in text
    assert "Overfull" not in (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")


@pytest.mark.parametrize("key", ["alibi", "softcap", "sinks", "rope", "kv_heads", "key_tokens"])
def test_keys_a_sheet_cannot_state_are_refused(key):
    data = dict(read_table(HOMEWORK), **{key: True})
    with pytest.raises(SpecError) as info:
        ex.exercise(data, ["s01"], 1)
    assert str(info.value) == (
        f"<dict>: {key}: an exercise sheet does not state this key yet; remove it, or render the derivation"
    )


@pytest.mark.parametrize("lang, engine", [("en", "pdflatex"), ("zh", "xelatex")])
def test_a_long_answers_table_starts_on_the_first_page_and_breaks_across_pages(latex, tmp_path, lang, engine):
    data = dict(read_table(HOMEWORK), tokens=["the", "cat", "sat", "on", "mats"], answer_rows="all")
    (v,) = ex.exercise(data, ["s01"], 1)
    pdf = latex(sheets.sheet(v, "latex", lang), engine, tmp_path)
    assert "Overfull" not in (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    pages = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True)
    header = {"en": "your answer", "zh": "你的答案"}[lang]
    numbered = [
        [int(line.split()[0]) for line in page.splitlines() if re.match(r"\s*\d+\s+[^\d\s.−-]", line)]
        for page in pages.stdout.split("\f")
        if page.strip()
    ]
    assert [header in page for page in pages.stdout.split("\f") if page.strip()] == [True] * len(numbered)
    assert numbered[0][:3] == [1, 2, 3]  # the table starts on page 1, under the questions
    assert [n for page in numbered for n in page if 1 <= n <= len(v.asked)][-1] == len(v.asked)
