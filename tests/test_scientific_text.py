"""Numbers in scientific notation in running text and table cells (the "why we scale" demo): set as math."""

import json
import shutil
import subprocess

import pytest

from symattn.cli import main

BIG = {"lang": "en", "Q": [[10, 0], [0, 1]], "K": [[10, 0], [0, 1]], "V": [[1, 0], [0, 1]], "focus": 1}


def _render(capsys, tmp_path, *argv):
    spec = tmp_path / "big.json"
    spec.write_text(json.dumps(BIG), encoding="utf-8")
    assert main(["render", str(spec), *argv]) == 0
    return capsys.readouterr().out


def test_the_percent_table_sets_a_tiny_weight_as_math(capsys, tmp_path):
    markdown = _render(capsys, tmp_path)
    assert "| attention weight | 100.0% | $2.0\\times 10^{-29}$% |" in markdown.splitlines()
    latex = _render(capsys, tmp_path, "--format", "latex")
    assert "attention weight & 100.0\\% & \\(2.0\\times 10^{-29}\\)\\% \\\\" in latex.splitlines()


@pytest.mark.client
def test_the_why_we_scale_demo_compiles(capsys, tmp_path):
    if not (shutil.which("latexmk") and shutil.which("pdflatex") and shutil.which("pdftotext")):
        pytest.skip("TeX Live and poppler-utils not installed")
    _render(capsys, tmp_path, "-o", str(tmp_path / "big.pdf"))
    pdf = str(tmp_path / "big.pdf")
    text = subprocess.run(["pdftotext", "-layout", pdf, "-"], capture_output=True, text=True, check=True).stdout
    assert " ".join(next(line for line in text.splitlines() if "attention weight" in line).split()) == (
        "attention weight 100.0% 2.0 × 10−29 %"
    )
