"""The check report as LaTeX and PDF: a booktabs table, typeset quantity names, every phrase translated."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace

import pytest

from symattn.checking.checker import check
from symattn.cli.commands import main
from symattn.input import builtin
from symattn.input.spec import load_spec
from symattn.rendering.layout import breakable
from symattn.rendering.renderer import render_report

ENGINES = {"zh": "xelatex", "en": "pdflatex"}
VERDICT_WORDS = {
    "zh": ["精确", "正确舍入", "沿用前面的数", "末位差一", "错误"],
    "en": ["exact", "rounded", "carried", "last-digit", "wrong"],
}
# names that are math, not English, and may stand in Chinese text
MATH_NAMES = {"Q", "K", "V", "S", "A", "e", "z", "d", "k", "softmax"}


def seed_report(lang):
    path = builtin.example_path("seed-claims", lang)
    return replace(check(None, str(path)), source=path.name, builtin=True)


def seed_tex(lang):
    return render_report(seed_report(lang), "latex", standalone=True)


def needs(*tools):
    for tool in tools:
        if not shutil.which(tool):
            pytest.skip(f"{tool} not installed")


# a student's calculator digits (25 and 50 of them), a claim in scientific notation and one far from 1
LONG = {
    "Q": [["1", "0"], ["0", "1"], ["1", "1"]],
    "K": [["1", "0"], ["1", "1"], ["0", "1"]],
    "V": [["1"], ["2"], ["3"]],
}
CALCULATOR = {"weights[1][1]": "0.4223187982515122", "scores[1][1]": "1.000000000000000000000001"}
LONGEST = {
    "weights[1][1]": "0.42231879825151220000000000000000000000000000000000",
    "scores[1][1]": "12345678901234567890123.0000000000000000000000000000000000000001",
    "scores[1][2]": "-1e-4999",
    "output[2][1]": "1.1234567890123456789e4000",
}


def long_report(claims, lang):
    return render_report(check(load_spec({**LONG, "lang": lang}), {"claims": claims}), "latex", standalone=True)


def table_of(tex):
    return next(line for line in tex.splitlines() if line.startswith("\\begin{longtable}"))


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_reports_stay_on_the_page_however_long_the_claims(latex_each, tmp_path, lang):
    documents = {
        "seed": seed_tex(lang),
        "calculator": long_report(CALCULATOR, lang),
        "longest": long_report(LONGEST, lang),
    }
    assert latex_each(documents, ENGINES[lang], tmp_path) == {label: [] for label in documents}


def test_claims_line_up_on_their_points_and_the_verdicts_take_what_is_left():
    tex = long_report(CALCULATOR, "en")
    assert table_of(tex) == (
        r"\begin{longtable}{@{}r@{\hspace{0.8em}}l@{\hspace{1em}}r@{}l@{\hspace{1.2em}}>{\raggedright\arraybackslash}"
        r"p{\dimexpr\ifdim\dimexpr\linewidth-36.1em\relax>14.5em 14.5em\else\linewidth-36.1em\fi\relax}"
        r"@{\hspace{1.5em}}r@{}l@{}}"
    )
    assert r"1 & score \(S\) (t1, t1) & \(1\) & \(.000000000000000000000001\) & \textbf{wrong} & \(1\) &  \\" in tex


def test_a_claim_too_long_to_line_up_breaks_after_every_fifth_digit():
    tex = long_report(LONGEST, "en")
    # the verdicts as wide as "wrong" needs; the claims flush left, the rest of a number indented
    assert table_of(tex) == (
        r"\begin{longtable}{@{}r@{\hspace{0.8em}}l@{\hspace{1em}}>{\raggedright\arraybackslash\hangindent=1em"
        r"\hangafter=1 }p{\dimexpr\linewidth-28.9em\relax}@{\hspace{1.2em}}>{\raggedright\arraybackslash}p{3.4em}"
        r"@{\hspace{1.5em}}r@{}l@{}}"
    )
    assert (
        r"3 & weight \(A\) (t1, t1) & \(0.42231\penalty1000 87982\penalty1000 51512\penalty1000 20000\penalty1000 "
        r"00000\penalty1000 00000\penalty1000 00000\penalty1000 00000\penalty1000 00000\penalty1000 00000\) & "
        r"\textbf{wrong} & \(0\) & \(.401112\) \\"
    ) in tex
    assert breakable(r"-1234567\pi/3") == r"-1234567\pi/3"  # runs under nine digits stay whole
    assert breakable("1.1234567890123456789") == r"1.12345\penalty1000 67890\penalty1000 12345\penalty1000 6789"


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_seed_report_pdf_fits_two_pages(tmp_path, capsys, lang):
    needs("latexmk", ENGINES[lang], "pdfinfo", "pdftotext")
    target = tmp_path / "x.pdf"
    assert main(["check", "--example", "--lang", lang, "--format", "pdf", "-o", str(target)]) == 1
    assert capsys.readouterr().err == ""
    info = subprocess.run(["pdfinfo", str(target)], capture_output=True, text=True, check=True).stdout
    pages = int(re.search(r"^Pages:\s+(\d+)$", info, re.M).group(1))
    assert pages <= 2
    text = subprocess.run(["pdftotext", "-layout", str(target), "-"], capture_output=True, text=True, check=True).stdout
    for key in ["0.650", "0.651", "0.650538", "4.387", "4.38358", *VERDICT_WORDS[lang]]:
        assert key in text, key
    assert ("（内置）" if lang == "zh" else "(built-in)") in text
    assert "built-in" not in text if lang == "zh" else True


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_table_and_quantities_typeset(lang):
    tex = seed_tex(lang)
    for needle in [
        r"\begin{longtable}",
        r"\toprule",
        r"\midrule",
        r"\bottomrule",
        r"\end{longtable}",
        r"\usepackage{array,booktabs,longtable}",
    ]:
        assert needle in tex
    rows = [line for line in tex.splitlines() if re.match(r"\d+ & ", line)]
    assert len(rows) == 42
    if lang == "en":
        assert rows[0] == r"1 & \(\sqrt{d_k}\) & \(1\) & \(.414\) & rounded & \(1\) & \(.41421\) \\"
        assert rows[16] == (
            r"17 & scaled \(S/\sqrt{d_k}\) (it, cat) & \(0\) & \(.650\) & "
            r"\textbf{last-digit} (truncated instead of rounded) & \(0\) & \(.650538\) \\"
        )
        assert rows[19] == r"20 & \(e^{z}\) (it, cat) & \(1\) & \(.916\) & carried & \(1\) & \(.91657\) \\"
        assert rows[22] == r"23 & sum of \(e^{z}\) (it) & \(4\) & \(.758\) & carried & \(4\) & \(.75986\) \\"
        assert rows[31] == r"32 & weight (percent) (it, cat) & \(40\) & \(.3\%\) & rounded & \(0\) & \(.402653\) \\"
        assert r"Fix first: scaled \(S/\sqrt{d_k}\) (it, cat) is given as \(0.650\) but should be \(0.651\)" in tex
        assert r"\dfrac{0.92}{\sqrt{2}} \approx 0.650538\qquad \text{exact} = \frac{23 \sqrt{2}}{50}" in tex
        assert "exact: 9, rounded: 20, carried: 6, last-digit: 2, wrong: 5" in tex
    else:
        assert rows[16] == (
            r"17 & 缩放后 \(S/\sqrt{d_k}\)（它，小猫） & \(0\) & \(.650\) & "
            r"\textbf{末位差一}（截断而非四舍五入） & \(0\) & \(.650538\) \\"
        )
        assert "精确：9、正确舍入：20、沿用前面的数：6、末位差一：2、错误：5" in tex
        assert r"\section*{手算结果核对\\[0.4ex]{\large\mdseries Transformer 注意力：Q/K/V 手算示例}}" in tex
    # the quantity names never show as plain text any more
    assert "d\\_k" not in tex and "\\surd" not in tex and "e\\textasciicircum" not in tex


def _math(tex):
    return re.findall(r"\\\((.*?)\\\)", tex) + re.findall(r"\\\[(.*?)\\\]", tex, re.S)


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_no_trivial_equalities(lang):
    tex = seed_tex(lang)
    for line in tex.splitlines():
        assert not re.fullmatch(r"\s*(.+?)\s*=\s*\1\s*", line), line
    for span in _math(tex):
        sides = [s.strip() for s in re.split(r"=|\\approx", span)]
        assert all(a != b for a, b in zip(sides, sides[1:])), span


def test_chinese_report_has_no_english_words():
    report = seed_report("zh")
    tex = render_report(report, "latex", standalone=True)
    body = tex.split(r"\begin{document}", 1)[1]
    body = body.replace(report.title, "").replace(report.source.replace("_", r"\_"), "")
    body = "\n".join(line for line in body.splitlines() if not line.startswith(r"\begin{longtable}"))
    body = re.sub(r"\\\(.*?\\\)|\\\[.*?\\\]", " ", body, flags=re.S)  # math
    body = re.sub(r"\\multicolumn\{\d+\}\{[lcr](@\{\})?\}|\\begin\{tabular\}\[b\]\{@\{\}[lcr]@\{\}\}", " ", body)
    body = re.sub(r"\\(begin|end)\{[a-z]+\}", " ", body)
    body = re.sub(r"\\[A-Za-z]+\*?(\[[^\]]*\])?(\{[0-9.]+(pt|em|ex)[^}]*\})*", " ", body)  # commands
    words = set(re.findall(r"[A-Za-z]+", body))
    assert words <= MATH_NAMES, sorted(words - MATH_NAMES)
    assert "（内置）" in tex and "built-in" not in tex


def test_derivation_preamble_is_unchanged():
    from symattn import derive, load_spec, render

    tex = render(derive(load_spec(builtin.example_path("seed", "en"))), "latex", standalone=True)
    assert "longtable" not in tex and "\\usepackage[pass,letterpaper]{geometry}" in tex  # page size only
