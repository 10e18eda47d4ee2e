"""Slide decks: the Beamer deck (every frame on its slide, every key number in the PDF) and the HTML deck
(reveal.js in headless Chromium at 1280 × 720: no slide scrolls, arrow keys move, nothing is fetched)."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import pytest

from symattn.cli.commands import main
from symattn.derivation.derive import derive
from symattn.exact.rounding import Num
from symattn.input import builtin
from symattn.input.spec import load_spec
from symattn.rendering.beamer import FRAME_HEIGHT, render_beamer
from symattn.rendering.deck import VENDOR, deck_page, frames, reveal_version
from symattn.rendering.numbers import tex_number
from symattn.rendering.paging import paginate
from symattn.rendering.renderer import block_note

from .conftest import chromium_driver
from .test_export import needs

# the seed, a 6 × 4 spec, several heads, the backward pass and the online softmax's tiles, in both languages
CASES = [(name, lang) for name in ("seed", "six-by-four", "multihead", "backward", "flash") for lang in ("en", "zh")]
CASES.append(("eight-tiled", "en"))  # blocks of 4 keys of 4 columns under a causal mask: the widest tile frames


def six_by_four(lang: str) -> dict:
    def rows(shift: int) -> list[list[str]]:
        return [[str(((i * 7 + j * 3 + shift) % 9 - 4) / 4) for j in range(4)] for i in range(6)]

    return {"lang": lang, "tokens": [f"t{i}" for i in range(6)], "Q": rows(0), "K": rows(1), "V": rows(2)}


def eight_tiled(lang: str) -> dict:
    def rows(shift: int) -> list[list[str]]:
        return [[str(((i * 7 + j * 3 + shift) % 9 - 4) / 4) for j in range(4)] for i in range(8)]

    tokens = [f"tok{i}" for i in range(8)]
    return {"lang": lang, "tokens": tokens, "Q": rows(0), "K": rows(1), "V": rows(2), "block_keys": 4, "mask": "causal"}


def deck(name: str, lang: str, **options):
    made = {"six-by-four": six_by_four, "eight-tiled": eight_tiled}
    spec = made[name](lang) if name in made else builtin.example_path(name, lang)
    return derive(load_spec(spec).with_options(**options))


def key_numbers(d) -> set[str]:
    """What each step shows: every matrix of the steps (S, Z, A, O, the gradients), the softmax rows' weights
    and the outputs, as the documents print them (plain decimals; math such as 10^k aside)."""
    shown: set[str] = set()
    for step in d.steps:
        if hasattr(step, "derivation"):
            shown |= key_numbers(step.derivation)
        if step.kind == "picture":
            continue
        for field in dataclasses.fields(step):
            value = getattr(step, field.name)
            if isinstance(value, tuple) and value and all(_is_row(r) for r in value):
                shown |= {tex_number(x) for row in value for x in row}
        for row in getattr(step, "rows", ()):
            for name in ("weights", "output"):
                shown |= {tex_number(x) for x in getattr(row, name, ())}
    return {x for x in shown if "\\" not in x}


def _is_row(row) -> bool:
    return isinstance(row, tuple) and bool(row) and all(isinstance(x, Num) for x in row)


def pdf_words(pdf: Path) -> set[str]:
    needs("pdftotext")
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    # a bracket's pieces are private-use glyphs that touch the numbers beside them
    return set(re.sub(r"[\ue000-\uf8ff\[\](),;]", " ", text.replace("−", "-")).split())


# --- the Beamer source ---------------------------------------------------------------


def test_the_beamer_deck_has_a_frame_per_step():
    tex = render_beamer(deck("seed", "en"))
    assert tex.startswith("% !TEX program = pdflatex\n\\documentclass[aspectratio=169]{beamer}\n")
    assert re.findall(r"^\\frametitle\{(.*)\}$", tex, re.M) == [
        "Transformer attention: Q/K/V by hand",
        "Setup",
        "Step 1: compute \\(QK^\\top\\) (the dot product of every Q with every K)",
        "Step 2: scale \\(S / \\sqrt{d_k}\\)",
        "Step 3: softmax of that row (scores become weights)",
        "Step 4: weights \\ensuremath{\\times} values, the new vector of “it”",
        "Step 5: the whole sentence at once (matrix form)",
        "A picture of the weights",  # the heatmap
        "A picture of the weights",  # the token diagram
        "Recap (with the numbers above)",
        "Toy example vs a real Transformer",
    ]
    assert tex.count("\\begin{frame}") == tex.count("\\end{frame}") == 11
    assert "\\section" not in tex and tex.endswith("\\end{document}\n")
    assert "\\setbeamertemplate{frametitle continuation}[from second][(continued)]" in tex


def test_the_tiles_are_a_frame_per_block():
    # the intro, one frame per block of keys (its z, m, rescale, l and acc), the division and LSE, split-KV
    tex = render_beamer(deck("flash", "en"))
    tiles = re.findall(
        r"\\frametitle\{The online softmax, block by block \(FlashAttention\)\}\n(?:\\framesubtitle\{(.*)\}\n)?", tex
    )
    assert tiles == ["", "Block 1 (keys 1 to 2):", "Block 2 (keys 3 to 4):", "", ""]
    block = tex.split("\\framesubtitle{Block 2 (keys 3 to 4):}\n")[1].split("\\end{frame}")[0]
    assert block == (
        "\\[\n\\begin{aligned}\n"
        "z &= \\begin{bmatrix}1 & -0.5\\end{bmatrix} \\\\\n"
        "m_{2} &= \\max\\bigl(m_{1},\\ \\max_j z_j\\bigr) = 1 \\\\\n"
        "e^{m_{1} - m_{2}} &= e^{0.5 - 1} \\approx 0.607 \\\\\n"
        "l_{2} &\\approx 0.607 \\cdot 1.082 + \\textstyle\\sum_{j=3}^{4} e^{z_j - m_{2}} \\approx 1.879 \\\\\n"
        "\\mathrm{acc}_{2} &\\approx 0.607 \\cdot \\begin{bmatrix}1 & 0.082\\end{bmatrix} + \\textstyle\\sum_{j=3}^{4} "
        "e^{z_j - m_{2}}\\, V_j \\approx \\begin{bmatrix}2.053 & 1.050\\end{bmatrix}\n"
        "\\end{aligned}\n\\]\n\n"
    )
    titled = [f.split("\n", 1)[0] for f in frames(deck("flash", "zh"))]
    assert titled.count("## 在线 softmax：逐块计算（FlashAttention）") == 5


def test_the_chinese_deck_uses_ctex_and_xelatex():
    tex = render_beamer(deck("seed", "zh"))
    assert tex.startswith("% !TEX program = xelatex\n\\documentclass[aspectratio=169]{beamer}\n\\usepackage{ctex}\n")
    assert "[from second][（续）]" in tex


def test_each_head_s_steps_are_frames_named_by_the_head():
    tex = render_beamer(deck("multihead", "en"))
    subtitles = re.findall(r"^\\framesubtitle\{(.*)\}$", tex, re.M)
    assert len(subtitles) == 10 and len(set(subtitles)) == 2  # five steps of each of two heads


def test_a_matrix_taller_than_a_frame_is_cut_at_the_frame_s_height():
    rows = " \\\\ ".join(" & ".join(["1.0"] * 3) for _ in range(16))
    display = "\\[\nS=\\begin{bmatrix}" + rows + "\\end{bmatrix}\n\\]"
    note = block_note("en")
    assert paginate(display, note) == display  # 16 rows fit a page
    cut = paginate(display, note, height=FRAME_HEIGHT)
    assert cut.count("\\begin{bmatrix}") == 2
    assert re.findall(r"\\text\{(rows [^}]*)\}", cut) == ["rows 1–9 of 16", "rows 10–16 of 16"]  # 9 rows: 112.5 pt


def test_decks_are_the_same_bytes_every_time():
    d = deck("multihead", "zh")
    assert render_beamer(d) == render_beamer(deck("multihead", "zh"))
    assert deck_page(d) == deck_page(deck("multihead", "zh"))


# --- the HTML deck, as text ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["six-by-four", *builtin.names()])
@pytest.mark.parametrize("expand", ["focus", "all"])
def test_the_html_deck_has_the_beamer_deck_s_frames(name, expand):
    d = deck(name, "en", expand=expand)
    tex = render_beamer(d)
    markdown = frames(d)
    # a title on every frame, and the same frames in both decks
    assert len(markdown) == tex.count("\\begin{frame}") == len(re.findall(r"^\\frametitle\{", tex, re.M))
    assert [len(re.findall(r"^#+ ", m, re.M)) for m in markdown] == [1] * len(markdown)


def test_the_steps_with_a_symbolic_example_s_values_are_frames_of_their_own():
    tex = render_beamer(deck("symbolic", "en"))
    assert re.findall(r"^\\framesubtitle\{(.*)\}$", tex, re.M) == ["With values"] * 8  # 5 steps, 2 figures, the recap


def test_the_html_deck_loads_nothing():
    page = deck_page(deck("seed", "en"))
    assert page.count("<section>") == 11
    assert f"reveal.js {reveal_version()}" in page and "Reveal.initialize(" in page
    markup = re.sub(r"<script>.*?</script>", "", page, flags=re.S)  # the styles and the slides
    assert page.count("<script>") == 3 and not re.search(
        r"<link|<img|<iframe|@import|url\((?!data:)|src=", markup, re.I
    )
    assert (VENDOR / "LICENSE").read_text().startswith("Copyright (C) 2011-2024 Hakim El Hattab")


def test_slides_picks_the_deck_from_the_output_name(tmp_path, capsys):
    html = tmp_path / "deck.html"
    assert main(["render", "--lang", "en", "--slides", "-o", str(html)]) == 0
    assert "Reveal.initialize(" in html.read_text(encoding="utf-8")
    assert main(["render", "--lang", "en", "--slides"]) == 0
    assert capsys.readouterr().out == render_beamer(deck("seed", "en"))
    assert main(["render", "--slides", "--format", "markdown"]) == 2
    assert (
        capsys.readouterr().err
        == "symattn: --slides makes a deck: beamer, beamer-pdf or slides, not --format markdown\n"
    )


# --- the Beamer deck compiled ---------------------------------------------------------------


@pytest.mark.client
@pytest.mark.slow
@pytest.mark.parametrize("name, lang", CASES)
def test_every_frame_fits_and_shows_its_numbers(latex, tmp_path, name, lang):
    d = deck(name, lang)
    tex = render_beamer(d)
    pdf = latex(tex, "pdflatex" if tex.startswith("% !TEX program = pdflatex") else "xelatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert re.findall(r"Overfull \\[hv]box.*", log) == []
    assert "Package beamer Warning" not in log
    numbers = key_numbers(d)
    assert len(numbers) > 20
    assert sorted(numbers - pdf_words(pdf)) == []


@pytest.mark.client
@pytest.mark.slow
def test_beamer_pdf_is_compiled_the_same_every_time(tmp_path, capsys):
    needs("latexmk", "pdflatex")
    first, second = tmp_path / "a.pdf", tmp_path / "b.pdf"
    assert main(["render", "--lang", "en", "--format", "beamer-pdf", "-o", str(first)]) == 0
    assert main(["render", "--lang", "en", "--slides", "-o", str(second)]) == 0
    assert first.read_bytes()[:5] == b"%PDF-"
    assert first.read_bytes() == second.read_bytes()
    assert {"0.92", "0.403", "4.384", "2.760"} <= pdf_words(first)


# --- the HTML deck in Chromium ---------------------------------------------------------------


@pytest.fixture(scope="module")
def deck_browser():
    driver = chromium_driver(window="1280,720", scrollbars=False)
    try:
        # the page itself 1280 × 720, whatever the window's frame takes
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 720, "deviceScaleFactor": 1, "mobile": False},
        )
        yield driver
    finally:
        driver.quit()


SLIDE_STATE = """
const s = Reveal.getCurrentSlide();
return {index: Reveal.getIndices().h, scrollHeight: s.scrollHeight, clientHeight: s.clientHeight,
        scrollWidth: s.scrollWidth, clientWidth: s.clientWidth, text: s.innerText};
"""


@pytest.mark.client
@pytest.mark.parametrize("name, lang", CASES)
def test_the_html_deck_in_chromium(deck_browser, tmp_path, name, lang):
    from selenium.webdriver.common.keys import Keys

    target = tmp_path / "deck.html"
    target.write_text(deck_page(deck(name, lang)), encoding="utf-8")
    deck_browser.get(target.as_uri())
    page = deck_browser.execute_script(
        "const math = document.querySelectorAll('span.math, div.math');"
        "return {width: innerWidth, height: innerHeight, total: Reveal.getTotalSlides(), math: math.length,"
        " typeset: Array.from(math).filter(el => el.querySelector(':scope > .katex, :scope > .katex-display')).length,"
        " errors: document.querySelectorAll('.katex-error').length,"
        " network: performance.getEntriesByType('resource').map(e => e.name)};"
    )
    assert (page["width"], page["height"]) == (1280, 720)
    assert page["typeset"] == page["math"] > 0 and page["errors"] == 0
    assert page["total"] >= len(frames(deck(name, lang)))
    body = deck_browser.find_element("tag name", "body")
    seen = []
    for k in range(page["total"]):
        state = deck_browser.execute_script(SLIDE_STATE)
        assert state["index"] == k
        assert state["scrollHeight"] <= state["clientHeight"] and state["scrollWidth"] <= state["clientWidth"], (
            k,
            state["text"][:80],
        )
        seen.append(state["text"])
        body.send_keys(Keys.ARROW_RIGHT)
    assert deck_browser.execute_script(SLIDE_STATE)["index"] == page["total"] - 1  # the last slide stays
    body.send_keys(Keys.ARROW_LEFT)
    assert deck_browser.execute_script(SLIDE_STATE)["index"] == page["total"] - 2
    assert deck_browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert page["network"] == []
    assert all(text.strip() for text in seen)


# --- slides use their space ----------------------------------------------------------------------------


def five_tokens(lang: str) -> dict:
    rows = [[1.0, 0.0], [0.0, 1.0], [0.9, 0.1], [0.5, 0.5], [0.2, 0.8]]
    return {"lang": lang, "tokens": ["the", "cat", "sat", "on", "mats"], "Q": rows, "K": rows[::-1], "V": rows}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_slide_says_above_of_the_heatmap(lang):
    d = derive(load_spec(five_tokens(lang)))
    above = {"en": "worked out above", "zh": "上文详算"}[lang]
    outlined = {"en": "The row of “mats” is outlined.", "zh": "加框的一行是「mats」。"}[lang]
    for text in (render_beamer(d), deck_page(d)):
        assert above not in text and outlined in text
    from symattn.rendering.renderer import render

    assert above in render(d, "markdown", figure_link=lambda name: name)  # a document has an "above"


def frame_titles(pdf: Path) -> list[str]:
    pages = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True)
    return [page.strip().splitlines()[0].strip() if page.strip() else "" for page in pages.stdout.split("\f")]


@pytest.mark.client
@pytest.mark.slow
@pytest.mark.parametrize("spec", ["seed", "five"])
def test_the_setup_is_one_frame_and_the_heatmap_fills_its_frame(latex, tmp_path, spec):
    needs("pdftotext")
    d = deck("seed", "en") if spec == "seed" else derive(load_spec(five_tokens("en")))
    pdf = latex(render_beamer(d), "pdflatex", tmp_path)
    titles = frame_titles(pdf)
    assert titles.count("Setup") == 1
    page = titles.index("A picture of the weights") + 1
    words = subprocess.run(
        ["pdftotext", "-bbox", "-f", str(page), "-l", str(page), str(pdf), "-"], capture_output=True, text=True
    ).stdout
    boxes = [
        (float(a), float(b), float(c), float(e))
        for a, b, c, e in re.findall(
            r'xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">(?:0\.\d{3}|0\.2)<',  # and five's exact 0.2
            words,
        )
    ]
    n = 9 if spec == "seed" else 25
    assert len(boxes) == n  # every weight in its cell
    # the numbers' height in pt, and the rows' pitch: a 5-token heatmap's were 4.8 pt (5 pt type) and 23 pt,
    # a third of the frame's 255 pt
    tops = sorted({round(y0, 1) for _, y0, _, _ in boxes})
    pitch = round((tops[-1] - tops[0]) / (len(tops) - 1), 1)
    assert ({round(y1 - y0, 1) for _, y0, _, y1 in boxes}, pitch) == (
        ({7.0}, 33.9) if spec == "seed" else ({6.5}, 31.2)
    )


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_html_deck_s_figures_take_the_slide_s_width(deck_browser, tmp_path, lang):
    target = tmp_path / "deck.html"
    target.write_text(deck_page(derive(load_spec(five_tokens(lang)))), encoding="utf-8")
    deck_browser.get(target.as_uri())
    sizes = deck_browser.execute_script(
        """
        const out = {};
        for (let k = 0; k < Reveal.getTotalSlides(); k++) {
          Reveal.slide(k);
          const s = Reveal.getCurrentSlide();
          s.querySelectorAll('svg.symattn-figure').forEach(svg => {
            const kind = svg.classList.contains('symattn-heatmap') ? 'heatmap' : 'diagram';
            const box = svg.querySelector('g.panel').getBoundingClientRect();
            out[kind] = [Math.round(box.width), Math.round(box.height), s.scrollHeight <= s.clientHeight];
          });
        }
        return out;
        """
    )
    assert sizes["heatmap"][1] >= 300 and sizes["diagram"][0] >= 800  # drawn at 160 and 300 px before
    assert sizes["heatmap"][2] and sizes["diagram"][2]


@pytest.mark.parametrize("name", ["multihead", "gqa"])
def test_several_heads_with_the_backward_pass_are_frames_named_by_each_head(name):
    # both decks stopped with a TypeError (the heading phrase of a head's backward pass became a list)
    d = deck(name, "en", backward=True)
    tex = render_beamer(d)
    whole = "dC" if name == "multihead" else "dO"  # multihead's W_O projects the heads' outputs
    for n, columns in ((1, "1–2"), (2, "3–4")):
        assert f"\\frametitle{{Head {n} backward: columns {columns} of \\({whole}\\)}}" in tex
    assert len(frames(d)) == tex.count("\\begin{frame}")
