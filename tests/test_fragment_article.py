"""A numbered fragment in an author's own document: a plain ``article`` (``\\parskip`` 0) or ``ctexart`` with
hyperref, compiled by TeX Live. Headings that hold math make clean bookmarks (read back from the .out file
that hyperref writes), with no "Token not allowed in a PDF string"; the stacked Q, K and V tables keep apart."""

from __future__ import annotations

import re
import subprocess

import pytest

from symattn.derivation.derive import derive
from symattn.input import builtin
from symattn.input.spec import load_spec
from symattn.rendering.bookmarks import bookmarked, heading_text
from symattn.rendering.renderer import render

from .test_export import needs


def fragment(name: str, lang: str) -> str:
    return render(derive(load_spec(builtin.example_path(name, lang)).with_options(numbered=True)), "latex")


def document(cls: str, body: str) -> str:
    return (
        f"\\documentclass{{{cls}}}\n\\usepackage{{amsmath}}\n\\usepackage{{tikz}}\n\\usetikzlibrary{{patterns}}\n"
        f"\\usepackage{{hyperref}}\n\\begin{{document}}\n{body}\\end{{document}}\n"
    )


def bookmarks(out: str) -> list[str]:
    """hyperref's .out file: each \\BOOKMARK's text, a PDF string in UTF-16 with octal escapes."""
    shown = []
    for text in re.findall(r"^\\BOOKMARK \[\d\]\[-\]\{[^}]*\}\{(.*)\}\{[^}]*\}% \d+$", out, re.M):
        raw = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), text.encode("ascii"))
        raw = re.sub(rb"\\(.)", rb"\1", raw)
        shown.append(raw[2:].decode("utf-16-be") if raw.startswith(b"\xfe\xff") else raw.decode("latin-1"))
    return shown


@pytest.mark.parametrize(
    "latex, plain",
    [
        (r"Step 2: scale \(S / \sqrt{d_k}\)", r"Step 2: scale S / √(d_k)"),
        (r"Mask: blocked positions become \(-\infty\)", "Mask: blocked positions become -∞"),
        (r"\raggedright A \& B \{x\} 50\% \textasciicircum{} {[}1{]} \textbackslash{}", r"A & B {x} 50% ^ [1] \ "[:-1]),
        (r"权重 \ensuremath{\times} 值向量 V", "权重 × 值向量 V"),
        (r"x \(\left(-1\right)\)", "x (-1)"),
    ],
)
def test_the_plain_text_of_a_heading(latex, plain):
    assert heading_text(latex) == plain


def test_a_heading_with_math_or_escapes_is_bookmarked_with_its_plain_text():
    assert bookmarked("Setup") == "Setup"
    assert bookmarked(r"A \(QK^\top\) \& 50\%") == r"\texorpdfstring{A \(QK^\top\) \& 50\%}{A QKᵀ \& 50\%}"
    assert r"\subsection{\texorpdfstring{Step 2: scale \(S / \sqrt{d_k}\)}{Step 2: scale S / √(d\_k)}}" in (
        fragment("causal", "en")
    )


@pytest.mark.client
def test_a_numbered_fragment_in_an_article_with_hyperref(latex, tmp_path):
    needs("pdftotext")
    pdf = latex(document("article", fragment("causal", "en")), "pdflatex", tmp_path)
    assert "Token not allowed in a PDF string" not in (tmp_path / "doc.log").read_text(errors="replace")
    assert bookmarks((tmp_path / "doc.out").read_text(encoding="ascii")) == [
        "Causal attention: looking back only",
        "Setup",
        "Step 1: compute QKᵀ (the dot product of every Q with every K)",
        "Step 2: scale S / √(d_k)",
        "Mask: blocked positions become -∞",
        "Step 3: softmax of that row (scores become weights)",
        "Step 4: weights × values, the new vector of “ate”",
        "Step 5: the whole sentence at once (matrix form)",
        "A picture of the weights",
        "Recap (with the numbers above)",
        "Toy example vs a real Transformer",
    ]
    # the Q, K and V tables, stacked: from a table's last row to the next one's header there is more room
    # than from a header to its first row (a rule touching a rule would leave the same)
    words = subprocess.run(
        ["pdftotext", "-bbox", "-f", "1", "-l", "1", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    top = {w: [float(y) for y in re.findall(rf'yMin="([\d.]+)"[^>]*>{w}<', words)] for w in ("token", "the", "ate")}
    header = top["token"][:3]
    inside = min(y for y in top["the"] if y > header[0]) - header[0]
    between = [header[k + 1] - max(y for y in top["ate"] if y < header[k + 1]) for k in range(2)]
    assert [round(gap - inside) for gap in between] == [7, 7]


@pytest.mark.client
@pytest.mark.slow
def test_a_numbered_chinese_fragment_with_several_heads_in_ctexart(latex, tmp_path):
    latex(document("ctexart", fragment("multihead", "zh")), "xelatex", tmp_path)
    assert "Token not allowed in a PDF string" not in (tmp_path / "doc.log").read_text(errors="replace")
    shown = bookmarks((tmp_path / "doc.out").read_text(encoding="ascii"))
    assert [b for b in shown if "\\" in b or "$" in b] == []
    assert "步骤 1：算 QKᵀ（每个 Q 和每个 K 的点积）" in shown


def numbered_steps(name: str, lang: str) -> tuple[str, ...]:
    from symattn.rendering.step_latex import step_latex

    return step_latex(derive(load_spec(builtin.example_path(name, lang)).with_options(numbered=True)))


def test_a_copied_step_with_a_bookmarked_heading_provides_texorpdfstring():
    steps = numbered_steps("causal", "en")
    provided = [s.split("\n", 1)[0] for s in steps if "\\texorpdfstring{" in s]
    assert provided == ["\\providecommand\\texorpdfstring[2]{#1}"] * 4  # steps 1, 2, the mask and step 4
    assert steps[0].startswith("\\subsection{Setup}\n")  # a heading without math needs nothing
    document_text = fragment("causal", "en")
    assert all(s.removeprefix("\\providecommand\\texorpdfstring[2]{#1}\n") in document_text for s in steps)


@pytest.mark.client
def test_each_copied_numbered_step_compiles_in_an_article_without_hyperref(latex, tmp_path):
    # the live page's "copy as LaTeX", pasted alone into a plain article (amsmath, as every fragment needs)
    for k, step in enumerate(numbered_steps("causal", "en")):
        folder = tmp_path / str(k)
        folder.mkdir()
        latex(
            f"\\documentclass{{article}}\n\\usepackage{{amsmath}}\n\\begin{{document}}\n{step}\n\\end{{document}}\n",
            "pdflatex",
            folder,
        )
        log = (folder / "doc.log").read_text(errors="replace")
        assert re.findall(r"^! .*", log, re.M) == [] and "Undefined control sequence" not in log, k
    # and with hyperref the line is a no-op: the bookmark is still the plain text
    step = numbered_steps("causal", "en")[2]
    latex(document("article", step + "\n"), "pdflatex", tmp_path)
    assert bookmarks((tmp_path / "doc.out").read_text(encoding="ascii")) == ["Step 2: scale S / √(d_k)"]


@pytest.mark.client
@pytest.mark.slow
def test_a_copied_numbered_chinese_step_compiles_in_ctexart_without_hyperref(latex, tmp_path):
    step = next(s for s in numbered_steps("causal", "zh") if "\\texorpdfstring{" in s)
    latex(
        f"\\documentclass{{ctexart}}\n\\usepackage{{amsmath}}\n\\begin{{document}}\n{step}\n\\end{{document}}\n",
        "xelatex",
        tmp_path,
    )
    assert "Undefined control sequence" not in (tmp_path / "doc.log").read_text(errors="replace")
