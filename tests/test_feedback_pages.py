"""Feedback pages a student reads (issue 19 §4): a PDF with no near-empty last page, and an HTML report
that reads well at 1000 px (tokens and column names never broken, closed forms at a legible size)."""

import shutil
import subprocess

import pytest

from symattn.classroom import exercises as ex
from symattn.classroom.gradebook import feedback
from symattn.classroom.grading import grade
from symattn.cli.commands import main
from symattn.rendering import pdf as pdfmod
from symattn.rendering.renderer import render_report

from .conftest import chromium_driver
from .test_exercise import HOMEWORK
from .test_grade import fill

# s01 of the Chinese class (seed 0): two slips, two answers too coarse and one carried sign
S01 = {
    "scores[3][1]": "0.11",
    "scores[3][2]": "0.29",
    "scores[3][3]": "0.09",
    "scaled[3][1]": "0.078",
    "scaled[3][2]": "0.21",
    "scaled[3][3]": "-0.064",
    "weights[3][1]": "0.3",
    "weights[3][2]": "0.378",
    "weights[3][3]": "0.289",
    "output[3][1]": "6.3",
    "output[3][2]": "2.9",
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    out = tmp_path_factory.mktemp("fb") / "class"
    assert main(["exercise", str(HOMEWORK), "--count", "1", "--lang", "zh", "-o", str(out)]) == 0
    v = ex.exercise(HOMEWORK, ["s01"], 0)[0]
    (out / "s01" / "answers.toml").write_text(fill(v, S01, "zh"), encoding="utf-8")
    return next(r for r in grade(out).rows if r.id == "s01")


def pages(data: bytes, tmp_path) -> list[str]:
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) not installed")
    path = tmp_path / "f.pdf"
    path.write_bytes(data)
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True, check=True).stdout
    return text.rstrip("\f").split("\f")


@pytest.mark.slow
@pytest.mark.client
def test_feedback_pdf_has_no_near_empty_last_page(graded, tmp_path):
    if shutil.which("xelatex") is None or shutil.which("latexmk") is None:
        pytest.skip("xelatex and latexmk not installed")
    tex = render_report(graded.report, "latex", standalone=True)
    # as typeset before: the last two lines alone on page two
    plain = pages(pdfmod.latex_to_pdf(tex, lang="zh"), tmp_path)
    assert len(plain) == 2
    assert [line.strip() for line in plain[1].splitlines() if line.strip()][-1].startswith("最先要改的：")
    fitted = pages(feedback(graded, "pdf"), tmp_path)
    assert len(fitted) == 1
    lines = [line.strip() for line in fitted[0].splitlines() if line.strip()]
    assert lines[:2] == ["1", "手算结果核对"]  # the page number, then the title
    assert lines[-1] == "最先要改的：分数 S（sat，sat）给出 0.09，应为 −0.09（后面的错误可能由它引起）。"


def test_refit_shares_the_last_lines_out_and_keeps_margins():
    log = "x\nsymattn-fill:2:35.39996pt:658.39711pt:794.96999pt\ny"
    assert pdfmod._refit(log) == "38.59"  # (794.97 − (658.40 + 35.40 + 24)) / 2
    assert pdfmod._refit(log.replace("fill:2:", "fill:3:")) == "53.44"  # half as much a page over two pages
    assert pdfmod._refit(log.replace("35.39996", "140.0")) is None  # over a fifth of a page: a real page
    assert pdfmod._refit(log.replace("fill:2:", "fill:1:")) is None
    assert pdfmod._refit(log.replace("794.96999", "760.0")) is None  # the margins would go under 36 pt
    assert pdfmod._refit("no measure") is None


CELLS = """
const table = document.querySelector('table');
const rows = Array.from(table.querySelectorAll('tbody tr'));
// the lines a cell's words sit on: the middles of its text and its formulas, more than 8 px apart
const lines = cell => {
  const mids = [];
  const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    if (n.parentElement.closest('.katex') || !n.textContent.trim()) continue;
    const r = document.createRange(); r.selectNodeContents(n);
    for (const q of r.getClientRects()) mids.push((q.top + q.bottom) / 2);
  }
  for (const k of cell.querySelectorAll('.katex .base')) { const q = k.getBoundingClientRect(); mids.push((q.top + q.bottom) / 2); }
  mids.sort((a, b) => a - b);
  return mids.filter((m, i) => i === 0 || m - mids[i - 1] > 8).length;
};
return {
  places: rows.map(tr => [2, 3, 4].map(i => lines(tr.children[i - 1]))),
  closed: rows.map(tr => parseFloat(getComputedStyle(tr.children[6].querySelector('.katex')).fontSize)),
  body: parseFloat(getComputedStyle(document.body).fontSize),
  width: document.body.getBoundingClientRect().width,
};
"""


@pytest.mark.client
def test_feedback_html_reads_well_at_1000px(graded, tmp_path):
    page = tmp_path / "s01.html"
    page.write_text(feedback(graded, "html"), encoding="utf-8")
    driver = chromium_driver(window="1000,900")
    try:
        driver.get(page.as_uri())
        driver.execute_async_script("const done = arguments[0]; document.fonts.ready.then(() => done());")
        state = driver.execute_script(CELLS)
    finally:
        driver.quit()
    assert state["places"] == [[1, 1, 1]] * 11  # quantity, row token and column each on one line
    # the table's 0.95 em, then the closed form's 1.25 em (KaTeX's own 1.1 elsewhere)
    assert state["body"] == 16
    assert state["closed"] == [19] * 11
    assert state["width"] > 900  # the report uses the window, not the derivation's 50 rem column
