"""One export for every shell (issue 29): rendering/export.py holds the table of formats and the TeX clock.

Each shell's own bytes are held by its tests (test_cli, test_serve, test_export, test_slides); here, what
the table itself promises, and the web's report PDF, which now folds a near-empty last page as the CLI's does.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from symattn.checking.checker import check
from symattn.derivation.derive import derive
from symattn.exact.heads import build_model
from symattn.input import builtin
from symattn.input.errors import RenderError
from symattn.input.spec import load_spec
from symattn.rendering.export import FORMATS, export
from symattn.rendering.pdf import latex_to_pdf
from symattn.rendering.renderer import render, render_report
from symattn.web.tasks import export_task


def needs(*tools: str) -> None:
    for tool in tools:
        if not shutil.which(tool):
            pytest.skip(f"{tool} not installed")


def pages(pdf: bytes, tmp_path: Path) -> tuple[int, str]:
    """The page count (pdfinfo) and the text (pdftotext) of a PDF."""
    path = tmp_path / "read.pdf"
    path.write_bytes(pdf)
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"^Pages:\s+(\d+)$", info, re.M)[1]), text


def test_the_table_names_every_format_each_shell_writes():
    assert {kind: list(rows) for kind, rows in FORMATS.items()} == {
        "Derivation": ["markdown", "latex", "pdf", "html", "beamer", "beamer-pdf", "slides"],
        "Report": ["text", "markdown", "latex", "pdf", "html", "json"],
    }
    assert {(row.suffix, row.media) for rows in FORMATS.values() for row in rows.values()} == {
        ("md", "text/markdown; charset=utf-8"),
        ("tex", "application/x-tex; charset=utf-8"),
        ("pdf", "application/pdf"),
        ("html", "text/html; charset=utf-8"),
        ("txt", "text/plain; charset=utf-8"),
        ("json", "application/json"),
    }


def test_markdown_and_latex_are_the_renderers_own():
    derivation = derive(load_spec(builtin.example_path("seed", "en")))
    assert export(derivation, "markdown").text == render(derivation, "markdown")
    assert export(derivation, "latex", standalone=True).text == render(derivation, "latex", standalone=True)
    report = check(None, str(builtin.example_path("seed-claims", "en")))
    assert export(report, "text").text == render_report(report, "text")


def test_markdown_beside_a_file_carries_its_figures(tmp_path):
    derivation = derive(load_spec(builtin.example_path("seed", "en")))
    made = export(derivation, "markdown", beside=str(tmp_path / "notes.md"))
    assert [name for name, _ in made.files] == ["notes.weights.svg", "notes.tokens.svg"]
    assert "](notes.weights.svg)" in made.text
    assert export(derivation, "markdown").files == ()


def test_an_unknown_format_names_the_documents_formats():
    report = check(None, str(builtin.example_path("seed-claims", "en")))
    with pytest.raises(RenderError) as info:
        export(report, "slides")
    assert str(info.value) == "unknown format 'slides'; expected one of text, markdown, latex, pdf, html, json"


def test_a_pdf_export_is_bytes_not_text():
    derivation = derive(load_spec(builtin.example_path("seed", "en")))
    made = export(derivation, "html")
    assert made.data == made.text.encode("utf-8")


def _long_report_claims() -> tuple[dict, dict]:
    """A spec of 12 tokens and 97 correct score claims: a report whose third page holds a few lines only."""

    def rows(r: int, c: int, k: int) -> list[list[str]]:
        return [[f"{((i * 7 + j * k) % 19 - 9) / 10:.1f}" for j in range(c)] for i in range(r)]

    raw = {"Q": rows(12, 2, 3), "K": rows(12, 2, 5), "V": rows(12, 2, 2), "lang": "en"}
    scores = build_model(load_spec(raw)).rounded("scores", 3)
    places = [(i, j) for i in range(12) for j in range(12)][:97]
    return raw, {f"scores[{i + 1}][{j + 1}]": format(scores[i][j], "f") for i, j in places}


def test_the_webs_report_pdf_folds_a_near_empty_last_page(tmp_path):
    needs("latexmk", "pdflatex", "pdfinfo", "pdftotext")
    raw, claims = _long_report_claims()
    data, media, name = export_task({"spec": raw, "format": "pdf", "what": "report", "claims": claims}, tex=True)
    assert (media, name) == ("application/pdf", "symattn-check.pdf")
    count, text = pages(data, tmp_path)
    assert count == 2
    # nothing is lost: the last claim's row and the summary after it
    assert re.search(r"^ *97 +score S \(t9, t1\) +−0\.530 +exact +−0\.53$", text, re.M)
    assert "exact: 97, rounded: 0, carried: 0, last-digit: 0, wrong: 0" in text
    # the same report set without fit_last_page runs onto a third page: what the web's export used to send
    report = check(load_spec(raw), {"claims": claims})
    unfitted, _ = pages(latex_to_pdf(render_report(report, "latex", standalone=True), lang="en"), tmp_path)
    assert unfitted == 3
