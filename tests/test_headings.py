"""Headings of a fragment in an author's document: the top level (--heading-level) and numbered headings."""

import re
import shutil
import subprocess

import pytest

from symattn.cli.commands import main
from symattn.derivation.derive import derive
from symattn.input import builtin
from symattn.input.errors import SpecError
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render

TITLE = "Multi-head attention: 2 heads"


def _render(fmt, lang="en", name="multihead", **options):
    return render(derive(load_spec(builtin.example_path(name, lang)).with_options(**options)), fmt)


def _headings(text):
    return [line for line in text.splitlines() if re.match(r"\\(sub)*(section|paragraph)|#", line)]


@pytest.mark.parametrize(
    "options, title, step, head_step",
    [
        ({}, f"\\section*{{\\raggedright {TITLE}}}", "\\subsection*{Setup}", "\\subsubsection*{Step 2: scale "),
        (
            {"numbered": True},
            f"\\section[{{{TITLE}}}]{{\\raggedright {TITLE}}}",
            "\\subsection{Setup}",
            "\\subsubsection{\\texorpdfstring{Step 2: scale ",
        ),
        (
            {"heading_level": 2},
            f"\\subsection*{{\\raggedright {TITLE}}}",
            "\\subsubsection*{Setup}",
            "\\paragraph*{Step 2: scale ",
        ),
        (
            {"heading_level": 3, "numbered": True},
            f"\\subsubsection[{{{TITLE}}}]{{\\raggedright {TITLE}}}",
            "\\paragraph{Setup}",
            "\\subparagraph{\\texorpdfstring{Step 2: scale ",
        ),
    ],
)
def test_latex_heading_levels(options, title, step, head_step):
    headings = _headings(_render("latex", **options))
    assert headings[0] == title and headings[1] == step
    assert any(h.startswith(head_step) for h in headings)  # a step inside a head, one level lower


@pytest.mark.parametrize("level, marks", [(1, ["#", "##", "###"]), (2, ["##", "###", "####"]), (3, ["###", "####"])])
def test_markdown_heading_levels(level, marks):
    text = _render("markdown", heading_level=level, numbered=True)  # Markdown has no numbered headings
    headings = _headings(text)
    assert headings[0] == "#" * level + " " + TITLE and headings[1] == "#" * (level + 1) + " Setup"
    assert sorted({h.split(" ")[0] for h in headings}) == sorted(marks + (["#####"] if level == 3 else []))
    assert text == _render("markdown", heading_level=level)


def test_the_default_is_unchanged():
    assert _render("latex") == _render("latex", heading_level=1, numbered=False)
    assert _render("latex", lang="zh").startswith("\\section*{多头注意力：2 个头}\n")


def test_the_chinese_title_enters_the_contents_as_it_is():
    # ctexart sets its headings its own way: no \raggedright, the same text in the contents
    assert _render("latex", lang="zh", numbered=True).startswith(
        "\\providecommand\\texorpdfstring[2]{#1}\n\\section[{多头注意力：2 个头}]{多头注意力：2 个头}\n"
    )


def test_a_bracket_in_the_title_cannot_end_the_optional_argument():
    spec = load_spec(
        {"title": "[CLS] attends]", "Q": [[1, 0]], "K": [[1, 0]], "V": [[1, 2]], "numbered": True, "heading_level": 2}
    )
    assert render(derive(spec), "latex").startswith(
        "\\providecommand\\texorpdfstring[2]{#1}\n\\subsection[{{[}CLS] attends]}]{\\raggedright {[}CLS] attends]}\n"
    )


@pytest.mark.parametrize(
    "data, message",
    [
        ({"heading_level": 4}, "<dict>: heading_level: expected a heading level 1, 2 or 3, got 4"),
        ({"heading_level": "2"}, None),
        ({"heading_level": True}, "<dict>: heading_level: expected a heading level 1, 2 or 3, got true"),
        ({"numbered": "yes"}, "<dict>: numbered: expected true or false, got 'yes'"),
        ({"numbered": 1}, "<dict>: numbered: expected true or false, got 1"),
    ],
)
def test_bad_heading_settings(data, message):
    spec = {"Q": [[1, 0]], "K": [[1, 0]], "V": [[1, 2]]} | data
    if message is None:
        assert load_spec(spec).document.heading_level == 2
        return
    with pytest.raises(SpecError) as error:
        load_spec(spec)
    assert str(error.value) == message


def test_the_command_line_flags(capsys):
    assert main(["render", "--example", "seed", "--lang", "en", "--format", "latex", "--heading-level", "2"]) == 0
    assert capsys.readouterr().out.startswith("\\subsection*{\\raggedright Transformer attention: Q/K/V by hand}\n")
    assert main(["render", "--example", "seed", "--lang", "en", "--format", "latex", "--numbered"]) == 0
    assert "\n\\subsection{Setup}\n" in capsys.readouterr().out
    assert main(["render", "--example", "seed", "--heading-level", "３"]) == 2
    assert capsys.readouterr().err.endswith("argument --heading-level: expected 1, 2 or 3, got '３'\n")


@pytest.mark.client
@pytest.mark.slow
def test_a_numbered_fragment_enters_the_authors_table_of_contents(tmp_path):
    if not (shutil.which("pdflatex") and shutil.which("pdftotext")):
        pytest.skip("pdflatex and pdftotext needed (TeX Live, poppler)")
    fragment = _render("latex", name="seed", heading_level=2, numbered=True)
    (tmp_path / "doc.tex").write_text(
        "\\documentclass[11pt]{article}\n\\usepackage[T1]{fontenc}\n\\usepackage{lmodern,amsmath,tikz}\n\\usetikzlibrary{patterns}\n"
        "\\begin{document}\n\\tableofcontents\n\\section{Attention in class}\nOur example.\n\n"
        + fragment
        + "\n\\end{document}\n",
        encoding="utf-8",
    )
    for _ in range(2):  # the contents are written on the first run and read on the second
        run = subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=300,
        )
        assert run.returncode == 0, run.stdout[-3000:]
    text = subprocess.run(["pdftotext", "doc.pdf", "-"], cwd=tmp_path, capture_output=True, text=True).stdout
    contents = text[: text.index("Our example.")]
    for entry in ("1 Attention in class", "1.1 Transformer attention: Q/K/V by hand", "1.1.1 Setup", "1.1.5 Step 4"):
        assert entry in contents, contents
