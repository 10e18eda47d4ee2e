"""--format pdf (latexmk + TeX Live) and --format html (one offline page, KaTeX), with real clients.

PDFs are read back with poppler's pdfinfo and pdftotext; HTML pages are opened in
headless Chromium (selenium + chromium-driver) with networking disabled. A test
skips only when its client is missing.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from symattn.cli.commands import main
from symattn.derivation.derive import derive
from symattn.input import builtin
from symattn.input.errors import RenderError
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render

from .conftest import chromium_driver

pytestmark = [pytest.mark.client, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent


def needs(*programs: str) -> None:
    for program in programs:
        if not shutil.which(program):
            pytest.skip(f"{program} not installed")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def pdf_text(path: Path) -> tuple[dict[str, str], str]:
    needs("pdfinfo", "pdftotext")
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True, check=True).stdout
    return fields, text


def numbers(text: str) -> set[str]:
    return set(re.findall(r"\d+\.\d+|\d+", text))


def seed_tex(lang: str) -> str:
    return render(derive(load_spec(builtin.example_path("seed", lang))), "latex", standalone=True)


# --- PDF ---------------------------------------------------------------------

TOKENS = {"zh": ["小猫", "吃", "它"], "en": ["cat", "eats", "it"]}
PRODUCER = {"zh": "xdvipdfmx (", "en": "pdfTeX-"}  # xelatex, pdflatex


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_render_pdf(tmp_path, capsys, lang):
    needs("latexmk", "xelatex" if lang == "zh" else "pdflatex")
    target = tmp_path / "x.pdf"
    assert run(capsys, "render", "--lang", lang, "-o", str(target)) == (0, "", "")  # -o x.pdf implies pdf
    info, text = pdf_text(target)
    assert info["Producer"].startswith(PRODUCER[lang])
    assert info["CreationDate"] == "Thu Jan  1 00:00:00 1970 UTC"  # SOURCE_DATE_EPOCH=0
    assert info["Page size"] == {"zh": "595.28 x 841.89 pts (A4)", "en": "612 x 792 pts (letter)"}[lang]
    for token in TOKENS[lang]:
        assert token in text
    assert {"0.92", "0.19", "0.75", "0.651", "0.707", "1.414", "4.384", "2.760"} <= numbers(text)


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_check_example_pdf(tmp_path, capsys, lang):
    needs("latexmk", "xelatex" if lang == "zh" else "pdflatex")
    target = tmp_path / "report.pdf"
    # the worked example has wrong numbers: exit 1, and the report is written all the same
    assert run(capsys, "check", "--example", "--lang", lang, "--format", "pdf", "-o", str(target)) == (1, "", "")
    _, text = pdf_text(target)
    for token in TOKENS[lang]:
        assert token in text
    assert {"0.92", "0.651", "0.650", "0.650538", "4.387"} <= numbers(text)


def test_pdf_is_byte_identical_across_runs(tmp_path, capsys):
    needs("latexmk", "pdflatex", "xelatex")
    digests = {}
    for engine in ("pdflatex", "xelatex"):
        for attempt in (1, 2):
            target = tmp_path / f"{engine}-{attempt}.pdf"
            assert (
                run(capsys, "render", "--lang", "en", "--format", "pdf", "--engine", engine, "-o", str(target))[0] == 0
            )
            digests[engine, attempt] = hashlib.sha256(target.read_bytes()).hexdigest()
        assert digests[engine, 1] == digests[engine, 2], engine
    info, _ = pdf_text(tmp_path / "pdflatex-1.pdf")
    assert info["CreationDate"] == "Thu Jan  1 00:00:00 1970 UTC"


def test_engine_choice():
    from symattn.rendering.pdf import choose_engine

    assert choose_engine(seed_tex("en")) == "pdflatex"
    assert choose_engine(seed_tex("zh")) == "xelatex"
    assert choose_engine("\\documentclass{article}\\begin{document}小\\end{document}") == "xelatex"
    assert choose_engine("x", lang="zh") == "xelatex"
    assert choose_engine(seed_tex("zh"), engine="lualatex") == "lualatex"
    with pytest.raises(RenderError) as err:
        choose_engine("x", engine="tex")
    assert str(err.value) == "unknown TeX engine 'tex'; expected one of xelatex, pdflatex, lualatex"


@pytest.mark.parametrize(
    "lang, message",
    [
        (
            "zh",
            "symattn: latexmk and xelatex are needed for PDF output; install them with: apt-get install "
            "latexmk texlive-xetex texlive-lang-chinese texlive-latex-recommended texlive-pictures\n",
        ),
        (
            "en",
            "symattn: latexmk and pdflatex are needed for PDF output; install them with: apt-get install "
            "latexmk texlive-latex-base texlive-fonts-recommended lmodern texlive-latex-recommended "
            "texlive-pictures\n",
        ),
    ],
)
def test_missing_tex_is_one_line(tmp_path, lang, message):
    empty = tmp_path / "empty"
    empty.mkdir()
    target = tmp_path / "x.pdf"
    out = subprocess.run(
        [sys.executable, "-m", "symattn", "render", "--lang", lang, "--format", "pdf", "-o", str(target)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PATH=str(empty)),
    )
    assert (out.returncode, out.stdout, out.stderr) == (2, "", message)
    assert not target.exists()


def test_tex_error_keeps_the_log(capsys):
    needs("latexmk", "pdflatex")
    from symattn.rendering.pdf import latex_to_pdf

    broken = "\\documentclass{article}\n\\begin{document}\nfine so far \\nosuchcommand\n\\end{document}\n"
    with pytest.raises(RenderError) as err:
        latex_to_pdf(broken)
    message = str(err.value)
    match = re.fullmatch(r"pdflatex failed: ! Undefined control sequence\. \(the log is kept at (\S+\.log)\)", message)
    assert match, message
    log = Path(match.group(1))
    try:
        assert log.is_file() and log.name.startswith("symattn-")
        assert "\\nosuchcommand" in log.read_text(encoding="utf-8")
    finally:
        log.unlink()


def test_tex_time_limit():
    needs("latexmk", "pdflatex")
    import time

    from symattn.rendering.pdf import latex_to_pdf

    forever = "\\documentclass{article}\n\\begin{document}\n\\loop\\iftrue\\repeat\n\\end{document}\n"
    start = time.monotonic()
    with pytest.raises(RenderError) as err:
        latex_to_pdf(forever, seconds=3)
    assert str(err.value) == "pdflatex took longer than 3 s (the time limit of a TeX run)"
    assert time.monotonic() - start < 10
    from symattn.input.limits import LATEX_SECONDS

    assert LATEX_SECONDS == 120


def test_tex_error_through_the_cli(tmp_path, capsys, monkeypatch):
    needs("latexmk", "pdflatex")
    import symattn.rendering.renderer

    real = symattn.rendering.renderer.render
    monkeypatch.setattr(
        symattn.rendering.renderer,
        "render",
        lambda d, fmt="markdown", **kw: real(d, fmt, **kw).replace("\\end{document}", "\\oops\n\\end{document}"),
    )
    target = tmp_path / "x.pdf"
    target.write_bytes(b"old")
    code, out, err = run(capsys, "render", "--lang", "en", "--format", "pdf", "-o", str(target))
    assert (code, out) == (2, "")
    assert err.startswith("symattn: pdflatex failed: ! Undefined control sequence. (the log is kept at ")
    assert err.count("\n") == 1
    Path(err.rsplit(" ", 1)[1][:-2]).unlink()
    assert target.read_bytes() == b"old"  # a failed run leaves the old file as it was


def test_pdf_refuses_a_terminal_and_bad_flags(capsys, monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    assert run(capsys, "render", "--format", "pdf") == (
        2,
        "",
        "symattn: a PDF is binary and stdout is a terminal; write it to a file with -o FILE.pdf\n",
    )
    assert run(capsys, "check", "--example", "--format", "pdf") == (
        2,
        "",
        "symattn: a PDF is binary and stdout is a terminal; write it to a file with -o FILE.pdf\n",
    )
    assert run(capsys, "render", "--format", "html", "--engine", "xelatex") == (
        2,
        "",
        "symattn: --engine needs --format pdf\n",
    )
    assert run(capsys, "render", "--engine", "tex")[0] == 2


def test_pdf_to_a_pipe(capsysbinary):
    needs("latexmk", "pdflatex")
    assert main(["render", "--lang", "en", "--format", "pdf"]) == 0
    out, err = capsysbinary.readouterr()
    assert out.startswith(b"%PDF-1.") and out.rstrip().endswith(b"%%EOF") and err == b""


def test_write_output_takes_bytes(tmp_path):
    from symattn.rendering.output import write_output

    target = tmp_path / "b.bin"
    write_output(str(target), b"\x00\xff%PDF")
    assert target.read_bytes() == b"\x00\xff%PDF"
    write_output(str(target), "π\n")
    assert target.read_bytes() == "π\n".encode()


# --- HTML: the page itself -----------------------------------------------------


def html_page(capsys, *argv: str) -> str:
    code = main(list(argv) + ["--format", "html"])
    out, err = capsys.readouterr()
    assert code in (0, 1) and err == ""
    return out


def test_html_page_is_self_contained_and_deterministic(capsys):
    page = html_page(capsys, "render")
    assert page == html_page(capsys, "render")
    assert page.startswith('<!DOCTYPE html>\n<html lang="zh-CN">\n<head>\n<meta charset="utf-8">\n')
    assert "<title>Transformer 注意力：Q/K/V 手算示例</title>" in page
    markup = re.sub(r"<(script|style)>.*?</\1>", "", page, flags=re.S)
    assert re.findall(r"(?:src|href)=|<link|<img|<iframe", markup) == []  # nothing loaded from anywhere
    assert markup.count("<script>") == 0 and page.count("<script>") == 2
    assert "url(fonts/" not in page and page.count("url(data:font/woff2;base64,") == 20
    assert not re.search(r"https?://(?!www\.w3\.org)", page.split("<script>")[0])  # no link in HTML or CSS
    assert '<span class="math">QK^\\top \\to \\mathrm{softmax} \\to \\times V</span>' in page
    assert '<div class="math display">Q=\\begin{bmatrix}1.0 &amp; 0.0 \\\\ ' in page
    assert "@media print" in page and "overflow-x: auto" in page
    version = (ROOT / "symattn" / "vendor" / "katex" / "VERSION").read_text().strip()
    assert f'<meta name="generator" content="symattn (KaTeX {version})">' in page
    en = html_page(capsys, "render", "--lang", "en")
    assert '<html lang="en">' in en and "<title>Transformer attention: Q/K/V by hand</title>" in en


def test_html_escapes_text():
    from symattn.rendering.html import markdown_to_html

    body, title = markdown_to_html("# a <b> & $x<y$\n\n<script>alert(1)</script>\n")
    assert body == (
        '<h1>a &lt;b&gt; &amp; <span class="math">x&lt;y</span></h1>\n<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>\n'
    )
    assert title == "a <b> & x<y"


def test_html_joins_chinese_lines():
    from symattn.rendering.html import markdown_to_html

    assert markdown_to_html("摊开。\n句子\nword\n词")[0] == "<p>摊开。句子\nword\n词</p>\n"


@pytest.mark.parametrize("golden_md", sorted(p.name for p in (ROOT / "tests" / "golden").glob("*.md")))
def test_html_math_is_the_markdown_math(golden_md):
    """Every $…$ and $$…$$ span the KaTeX tests parse becomes one math element, in order, and nothing else."""
    import html

    from symattn.rendering.html import markdown_to_html

    from .conftest import math_spans

    markdown = (ROOT / "tests" / "golden" / golden_md).read_text(encoding="utf-8")
    body, _ = markdown_to_html(markdown)
    elements = re.findall(r'<(span|div) class="math(?: display)?">(.*?)</\1>', body, re.S)
    ours = [(html.unescape(tex), tag == "div") for tag, tex in elements]
    assert sorted(ours) == sorted((s["tex"], s["display"]) for s in math_spans(markdown))
    assert "$" not in re.sub(r'<(span|div) class="math(?: display)?">.*?</\1>', "", body, flags=re.S)


def test_vendored_katex_matches_the_test_copy():
    vendor = ROOT / "symattn" / "vendor" / "katex"
    npm = ROOT / "tests" / "katex" / "node_modules" / "katex"
    if not npm.is_dir():
        pytest.skip("KaTeX not installed (run: npm ci --prefix tests/katex)")
    import json

    assert (vendor / "VERSION").read_text() == json.loads((npm / "package.json").read_text())["version"] + "\n"
    for name in ("katex.min.js", "katex.min.css"):
        assert (vendor / name).read_bytes() == (npm / "dist" / name).read_bytes()
    assert sorted(p.name for p in (vendor / "fonts").iterdir()) == sorted(
        p.name for p in (npm / "dist" / "fonts").glob("*.woff2")
    )
    assert (vendor / "LICENSE").read_bytes() == (npm / "LICENSE").read_bytes()


# --- HTML in a real browser ----------------------------------------------------


@pytest.fixture(scope="session")
def browser():
    driver = chromium_driver()
    try:
        yield driver
    finally:
        driver.quit()


PAGE_STATE = """
const math = document.querySelectorAll('span.math, div.math');
return {
  math: math.length,
  typeset: Array.from(math).filter(el => el.querySelector(':scope > .katex, :scope > .katex-display')).length,
  errors: document.querySelectorAll('.katex-error').length,
  text: document.body.innerText,
  scrollWidth: document.documentElement.scrollWidth,
  innerWidth: window.innerWidth,
  network: performance.getEntriesByType('resource').map(e => e.name).filter(n => /^https?:/i.test(n)),
  lang: document.documentElement.lang,
  fonts: document.fonts.status,
};
"""


def open_page(driver, path: Path) -> dict:
    driver.get(path.as_uri())
    driver.execute_async_script("const done = arguments[0]; document.fonts.ready.then(() => done());")
    return driver.execute_script(PAGE_STATE)


PAGES = [("render", name, lang) for name in builtin.names() for lang in ("zh", "en")] + [
    ("check", "seed-claims", lang) for lang in ("zh", "en")
]


@pytest.mark.parametrize("command, name, lang", PAGES)
def test_html_in_chromium(browser, tmp_path, capsys, command, name, lang):
    target = tmp_path / f"{name}.{lang}.html"
    argv = ["render", "--example", name] if command == "render" else ["check", "--example"]
    assert main(argv + ["--lang", lang, "-o", str(target)]) in (0, 1)  # -o x.html implies html
    assert capsys.readouterr().err == ""
    state = open_page(browser, target)
    assert state["lang"] == {"zh": "zh-CN", "en": "en"}[lang]
    assert state["math"] > 0
    assert state["typeset"] == state["math"]
    assert state["errors"] == 0
    assert "$" not in state["text"]
    assert "\\begin{" not in state["text"] and "\\frac" not in state["text"]
    assert state["innerWidth"] == 1000
    assert state["scrollWidth"] <= state["innerWidth"]
    assert state["network"] == []
    assert state["fonts"] == "loaded"


def test_katex_error_shows_red(browser, tmp_path):
    from symattn.rendering.html import page

    target = tmp_path / "bad.html"
    target.write_text(page("# t\n\n$\\frac{1}{$ and $x$\n", "en"), encoding="utf-8")
    state = open_page(browser, target)
    assert (state["math"], state["typeset"], state["errors"]) == (2, 1, 1)
    color = browser.execute_script("return getComputedStyle(document.querySelector('.katex-error')).color")
    assert color == "rgb(204, 0, 0)"


def test_wide_math_scrolls_in_its_own_box(browser, tmp_path):
    from symattn.rendering.html import page

    target = tmp_path / "wide.html"
    row = " & ".join(["0.123456"] * 40)
    target.write_text(page(f"# wide\n\n$$\n\\begin{{bmatrix}}{row}\\end{{bmatrix}}\n$$\n", "en"), encoding="utf-8")
    state = open_page(browser, target)
    assert state["errors"] == 0 and state["scrollWidth"] <= state["innerWidth"]
    box = browser.execute_script(
        "const b = document.querySelector('div.math'); return [b.scrollWidth, b.clientWidth, getComputedStyle(b).overflowX]"
    )
    assert box[0] > box[1] and box[2] == "auto"


def test_result_pdf_for_notebooks(tmp_path):
    # nbconvert's PDF export cannot set Chinese; Result.pdf() is the way out, and it is whole
    needs("latexmk", "xelatex")
    import symattn

    path = tmp_path / "seed.pdf"
    path.write_bytes(symattn.solve(str(builtin.example_path("seed", "zh"))).pdf())
    info, text = pdf_text(path)
    assert info["Page size"] == "595.28 x 841.89 pts (A4)"
    assert all(token in text for token in ("小猫", "吃", "它"))


def test_labels_and_titles_are_shown_as_typed_in_the_pdf(tmp_path, capsys):
    # TeX's fonts joined -- into an en dash, '' into ”, !` into ¡ and ,, into „; ` and ' became curly quotes
    needs("latexmk", "pdflatex")
    spec = tmp_path / "s.toml"
    spec.write_text(
        'title = "Dashes -- --- and quotes \'\' `` !` ?` ,,"\nlang = "en"\n'
        'tokens = ["a--b", "c---d", "\'\'e\'\'", "!`f?`", ",,h", "x\'y`z"]\n'
        "Q = [[1], [2], [3], [-1], [0.5], [0]]\nK = [[1], [2], [3], [-1], [0.5], [0]]\n"
        'V = [[1], [2], [3], [-1], [0.5], [0]]\nfigures = "none"\n',
        encoding="utf-8",
    )
    target = tmp_path / "x.pdf"
    assert run(capsys, "render", str(spec), "-o", str(target)) == (0, "", "")
    text = pdf_text(target)[1]
    assert "Dashes -- --- and quotes '' `` !` ?` ,," in text
    for label in ("a--b", "c---d", "''e''", "!`f?`", ",,h", "x'y`z"):
        assert f"“{label}”" in text  # the focus row's label, quoted by the document's own quotes
    assert not [joined for joined in ("a–b", "c—d", "”e”", "¡f¿", "„h", "x’y‘z") if joined in text]  # none anywhere
