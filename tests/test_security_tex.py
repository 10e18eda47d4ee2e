"""User text is never TeX code: title math is a whitelist grammar, and TeX runs in a sandbox behind it.

A secret file sits beside every attack; it must never appear in any output, by any route to TeX: the
command line, the web page's export, exercise sheets and keys, and the LaTeX a user downloads and compiles.
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from symattn.cli.commands import main
from symattn.input.errors import RenderError
from symattn.input.text import math_problem
from symattn.input.titlemath import emit, parse
from symattn.rendering.escape import escape_katex_text, escape_latex, escape_latex_words
from symattn.rendering.pdf import latex_to_pdf

CANARY = "CANARY7Q2X"
TINY = {"lang": "en", "Q": [[1]], "K": [[1]], "V": [[1]]}

# (title math, the one-line problem): each would read or write a file, or hang TeX, if passed through
ATTACKS = [
    ("^^5cinput{SECRET}", "'^^' is not allowed (TeX reads it as a character code) in $^^5cinput{SECRET}$"),
    ("\\in^^70ut{SECRET}", "'^^' is not allowed (TeX reads it as a character code) in $\\in^^70ut{SECRET}$"),
    ("\\InputIfFileExists{SECRET}{}{}", "\\InputIfFileExists is not allowed in math"),
    ("\\pdffiledump length 9{SECRET}", "\\pdffiledump is not allowed in math"),
    ("\\directlua{io.open('SECRET','w')}", "\\directlua is not allowed in math"),
    ("\\loop\\iftrue\\repeat", "\\loop is not allowed in math"),
    ("\\input{SECRET}", "\\input is not allowed in math"),
    ("x^{^^5c}input", "'^^' is not allowed (TeX reads it as a character code) in $x^{^^5c}input$"),
    ("\\text{\\input{SECRET}}", "the character '\\' is not allowed in \\text{…} in $\\text{\\input{SECRET}}$"),
    ("a % comment", "the character '%' is not allowed in $a % comment$"),
    ("a & b", "the character '&' is not allowed in $a & b$"),
    ("a # b", "the character '#' is not allowed in $a # b$"),
    ("a\\\\b", "the command \\\\ is not allowed in $a\\\\b$"),
    ("x\\", "an unclosed $ (write \\$ for a dollar sign)"),  # the closing $ is escaped
    ("a^2^3", "two superscripts on one base in $a^2^3$"),
    ("x_", "'_' needs something to raise or lower in $x_$"),
    ("\\frac{1}", "\\frac needs 2 argument(s) in $\\frac{1}$"),
    ("\\sqrt[3", "an unclosed [ after \\sqrt in $\\sqrt[3$"),
    ("{x", "unbalanced braces in ${x$"),
]


@pytest.mark.parametrize("math, problem", ATTACKS)
def test_attack_math_is_refused_by_name(math, problem):
    assert math_problem(f"T ${math}$") == problem


# (title math, as LaTeX re-emits it from the tree): the grammar's forms, each in canonical form
ACCEPTED = [
    ("Q = XW_Q", "Q = XW_Q"),
    ("x_i^2 + y^2_i", "x_i^2 + y^2_i"),
    ("a ^2", "a^2"),
    ("\\frac12 + \\sqrt 2 + \\sqrt[3]{x}", "\\frac{1}{2} + \\sqrt{2} + \\sqrt[3]{x}"),
    ("\\operatorname{softmax}(QK^\\top/\\sqrt{d_k})V", "\\operatorname{softmax}(QK^{\\top}/\\sqrt{d_k})V"),
    ("e^{z - \\max_j z_j}", "e^{z - \\max_j z_j}"),
    ("\\alpha\\beta + \\alpha x", "\\alpha\\beta + \\alpha x"),
    ("f'^2", "f'^2"),
    ("\\{a\\} \\, \\| b \\|", "\\{a\\} \\, \\| b \\|"),
    ("\\text{loss # 1, 50% & more}", "\\text{loss \\# 1, 50\\% \\& more}"),
]


@pytest.mark.parametrize("math, tex", ACCEPTED)
def test_accepted_math_is_re_emitted_from_the_tree(math, tex):
    assert math_problem(f"T ${math}$") is None
    assert emit(parse(math), escape_latex) == tex
    assert emit(parse(math), escape_katex_text) == tex  # ASCII math: the same for KaTeX


def test_one_title_means_the_same_in_every_format(capsys, tmp_path):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({**TINY, "title": "Cost 50% of $\\frac12 x^\\top$ \\$"}), encoding="utf-8")
    assert main(["render", str(spec)]) == 0
    markdown = capsys.readouterr().out
    assert markdown.splitlines()[0] == "# Cost 50% of $\\frac{1}{2} x^{\\top}$ \\$"
    assert main(["render", str(spec), "--format", "latex"]) == 0
    latex = capsys.readouterr().out
    assert "Cost 50\\% of \\(\\frac{1}{2} x^{\\top}\\) \\$" in latex


# --- every route to TeX ---------------------------------------------------------------------------


@pytest.fixture()
def secret(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_text(CANARY + "\n", encoding="utf-8")
    return path


def _attack_titles(secret: Path) -> list[str]:
    return [f"Hello ${math.replace('SECRET', str(secret))}$" for math, _ in ATTACKS]


def _needs_tex():
    if not shutil.which("latexmk") or not shutil.which("pdflatex"):
        pytest.skip("latexmk and pdflatex not installed (TeX Live)")


@pytest.mark.client
def test_cli_pdf_refuses_every_attack_title(capsys, tmp_path, secret):
    for i, title in enumerate(_attack_titles(secret)):
        spec = tmp_path / f"a{i}.json"
        spec.write_text(json.dumps({**TINY, "title": title}), encoding="utf-8")
        out = tmp_path / f"a{i}.pdf"
        assert main(["render", str(spec), "--format", "pdf", "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"symattn: {spec}: title: ") and err.count("\n") == 1
        assert not out.exists()


@pytest.mark.client
def test_exercise_refuses_an_attack_title(capsys, tmp_path, secret):
    template = (Path(__file__).resolve().parent.parent / "examples" / "homework.toml").read_text(encoding="utf-8")
    title = _attack_titles(secret)[0]
    hostile = tmp_path / "t.toml"
    hostile.write_text(
        template.replace('title = "Homework 3: attention by hand"', "title = " + json.dumps(title)), encoding="utf-8"
    )
    out = tmp_path / "class"
    assert main(["exercise", str(hostile), "--count", "2", "--format", "pdf", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"symattn: {hostile}: title: '^^' is not allowed (TeX reads it as a character code) in "
        f"$^^5cinput{{{secret}}}$\n"
    )
    assert not out.exists() or not any(out.iterdir())


def test_web_export_refuses_every_attack_title(secret):
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from symattn.web.app import create_app

    with TestClient(create_app(hosts=("testserver",))) as client:
        for title in _attack_titles(secret):
            for fmt in ("latex", "pdf", "markdown"):
                response = client.post("/api/export", json={"spec": {**TINY, "title": title}, "format": fmt})
                assert response.status_code == 400, (title, fmt)
                assert response.json()["error"].startswith("spec: title: ")
                assert CANARY not in response.text


# --- defence in depth: TeX itself cannot leave its folder -----------------------------------------


def _document(body: str) -> str:
    return "\\documentclass{article}\n\\begin{document}\n" + body + "\n\\end{document}\n"


@pytest.mark.client
@pytest.mark.parametrize("engine", ["pdflatex", "xelatex", "lualatex"])
def test_tex_reads_nothing_outside_its_folder(engine, secret):
    _needs_tex()
    if not shutil.which(engine):
        pytest.skip(f"{engine} not installed")
    body = (
        f"\\IfFileExists{{{secret}}}{{FOUND}}{{ABSENT}} "
        f"\\IfFileExists{{../{secret.parent.name}/{secret.name}}}{{FOUND}}{{ABSENT}} done"
    )
    pdf = latex_to_pdf(_document(body), engine=engine)
    text = _pdf_text(pdf)
    assert text.split() == ["ABSENT", "ABSENT", "done", "1"]


@pytest.mark.client
@pytest.mark.parametrize("engine", ["pdflatex", "xelatex", "lualatex"])
def test_tex_writes_nothing_outside_its_folder(engine, tmp_path):
    _needs_tex()
    if not shutil.which(engine):
        pytest.skip(f"{engine} not installed")
    target = tmp_path / "written.txt"
    body = f"\\immediate\\openout5={target} \\immediate\\write5{{x}}\\immediate\\closeout5 done"
    with pytest.raises(RenderError, match=r"failed: ! I can't write on file"):
        latex_to_pdf(_document(body), engine=engine)
    assert not target.exists()


@pytest.mark.client
def test_lualatex_runs_without_lua_file_access(tmp_path):
    _needs_tex()
    if not shutil.which("lualatex"):
        pytest.skip("lualatex not installed")
    target = tmp_path / "lua.txt"
    body = (
        f"\\directlua{{local f = io.open('{target}', 'w') if f then f:write('x') f:close() "
        f"tex.print('OPENED') else tex.print('REFUSED') end}}"
    )
    assert _pdf_text(latex_to_pdf(_document(body), engine="lualatex")).split() == ["REFUSED", "1"]
    assert not target.exists()


@pytest.mark.client
def test_downloaded_latex_compiles_as_a_user_would(tmp_path):
    """The LaTeX a user downloads from the page, compiled with plain pdflatex outside any sandbox."""
    _needs_tex()
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from symattn.web.app import create_app

    title = "Check $\\operatorname{softmax}(QK^\\top/\\sqrt{d_k})$ at 50% \\$ & #1"
    with TestClient(create_app(hosts=("testserver",))) as client:
        response = client.post("/api/export", json={"spec": {**TINY, "title": title}, "format": "latex"})
    assert response.status_code == 200
    (tmp_path / "doc.tex").write_bytes(response.content)
    run = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-2000:]
    text = _pdf_text((tmp_path / "doc.pdf").read_bytes())
    assert "Check softmax(QK ⊤ / dk ) at 50% $ & #1" in text.splitlines()


def _pdf_text(pdf: bytes) -> str:
    if not shutil.which("pdftotext"):
        pytest.skip("pdftotext not installed (poppler-utils)")
    return subprocess.run(["pdftotext", "-", "-"], input=pdf, capture_output=True, check=True).stdout.decode()


def test_a_long_word_of_user_text_may_break_every_ten_letters_in_latex():
    gap = "\\hskip0pt plus4em\\penalty0\\hskip0pt plus-4em\\relax "
    assert escape_latex_words("a short label of words") == "a short label of words"
    assert escape_latex_words("x " + "a_" * 12) == "x " + "a\\_" * 5 + gap + "a\\_" * 5 + gap + "a\\_" * 2
    arabic = "قطة" * 8  # a right-to-left run, and letters that join: never cut
    assert escape_latex_words(arabic) == escape_latex(arabic)
    accented = ["e\u0301" * 5, "e\u0301" * 5, "e\u0301" * 2]  # a letter keeps its combining mark
    assert escape_latex_words("".join(accented)) == gap.join(escape_latex(piece) for piece in accented)
