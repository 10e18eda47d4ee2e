"""Pictures of the weights: the SVG read back as XML, TikZ compiled by TeX Live and read with pdftotext, the
HTML page in Chromium, the SVG files beside Markdown, and ``figures = "none"`` everywhere."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

from symattn.cli.commands import main
from symattn.derivation.derive import derive
from symattn.input import builtin
from symattn.input.errors import SpecError
from symattn.input.spec import load_spec
from symattn.rendering import colours
from symattn.rendering.figure_parts import LINE, TALL
from symattn.rendering.figures import all_figures
from symattn.rendering.html import derivation_page
from symattn.rendering.renderer import render
from symattn.rendering.svg import svg, weights_svg

from .test_export import browser, needs, open_page  # noqa: F401 (a fixture)

SVG = "{http://www.w3.org/2000/svg}"
ROOT = Path(__file__).resolve().parent.parent


def example(name: str, lang: str = "en", **options):
    return derive(load_spec(builtin.example_path(name, lang)).with_options(**options))


def shown_A(markdown: str) -> list[list[list[str]]]:
    """Every A matrix the Markdown shows (one per head), as its entries' text."""
    blocks = re.findall(r"^A(?:=|\\approx)\\begin\{bmatrix\}(.*?)\\end\{bmatrix\}", markdown, re.M)
    return [[row.split(" & ") for row in block.split(r" \\ ")] for block in blocks]


def parse(svg_text: str) -> ET.Element:
    return ET.fromstring(svg_text)


def cells(root: ET.Element, panel: int = 0) -> list[ET.Element]:
    group = root.findall(f"{SVG}g[@class='panel']")[panel]
    return [r for r in group.iter(f"{SVG}rect") if r.get("class", "").startswith("cell")]


def cell_texts(root: ET.Element, panel: int = 0) -> dict[tuple[int, int], str]:
    group = root.findall(f"{SVG}g[@class='panel']")[panel]
    return {
        (int(t.get("data-row")), int(t.get("data-col"))): "".join(t.itertext())
        for t in group.iter(f"{SVG}text")
        if t.get("class") == "number"
    }


def figure(d, fid: str):
    return next(f for f in all_figures(d) if f.id == fid)


# --- the SVG, read back --------------------------------------------------------


@pytest.mark.parametrize("name, lang", [("seed", "en"), ("seed", "zh"), ("cross", "en"), ("projection", "zh")])
def test_the_heatmap_has_one_cell_per_weight_holding_its_shown_number(name, lang):
    d = example(name, lang)
    (A,) = shown_A(render(d, "markdown"))
    root = parse(weights_svg(d))
    assert len(cells(root)) == len(A) * len(A[0]) == len(d.tokens) * len(d.key_tokens)
    assert cell_texts(root) == {(i, j): x for i, row in enumerate(A) for j, x in enumerate(row)}
    labels = root.findall(f".//{SVG}text[@class='row']")
    assert [t.text for t in labels] == list(d.tokens)
    assert [t.text for t in root.findall(f".//{SVG}text[@class='col']")] == list(d.key_tokens)
    assert [t.get("font-weight") for t in labels] == [None] * d.focus + ["bold"] + [None] * (
        len(d.tokens) - d.focus - 1
    )


def test_the_focus_row_is_outlined():
    d = example("seed", "en", focus="eats")
    root = parse(weights_svg(d))
    focus = next(r for r in root.iter(f"{SVG}rect") if r.get("class") == "focus")
    row = [c for c in cells(root) if c.get("data-row") == "1"]
    assert focus.get("y") == row[0].get("y") and focus.get("x") == row[0].get("x")
    assert focus.get("height") == row[0].get("height")
    assert Decimal(focus.get("width")) == sum(Decimal(c.get("width")) for c in row)
    assert (focus.get("fill"), focus.get("stroke")) == ("none", "#000000")


def test_causal_mask_cells_are_hatched_and_keep_their_number():
    d = example("causal", "en")
    root = parse(weights_svg(d))
    masked = {(int(c.get("data-row")), int(c.get("data-col"))) for c in cells(root) if "masked" in c.get("class")}
    assert masked == {(0, 1), (0, 2), (1, 2)}  # j > i
    hatch = root.find(f".//{SVG}pattern")
    assert all(c.get("fill") == f"url(#{hatch.get('id')})" for c in cells(root) if "masked" in c.get("class"))
    assert all(c.get("fill").startswith("#") for c in cells(root) if "masked" not in c.get("class"))
    assert [cell_texts(root)[k] for k in sorted(masked)] == ["0", "0", "0"]
    tex = render(d, "latex")
    assert tex.count(r"\fill[pattern=north east lines,pattern color=black!55]") == 2  # the cells and the legend
    # the legend shows the hatch and names it
    assert root.find(f".//{SVG}rect[@class='swatch']") is not None
    assert "masked" in [t.text for t in root.iter(f"{SVG}text")]


def test_a_masked_key_has_no_line_in_the_token_diagram():
    d = example("causal", "en", focus="cat")
    root = parse(svg(figure(d, "tokens")))
    lines = root.findall(f".//{SVG}line")
    assert [line.get("data-key") for line in lines] == ["0", "1"]  # "ate" is masked for "cat"
    widths = [Decimal(line.get("stroke-width")) for line in lines]
    assert widths == [Decimal("2.17"), Decimal("3.83")]  # 6 pt × 0.362 and × 0.638: as thick as the weight
    assert [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "number"] == ["0.362", "0.638"]


def test_several_heads_get_one_heatmap_each():
    d = example("multihead", "en")
    heads = shown_A(render(d, "markdown"))
    assert len(heads) == 2
    root = parse(weights_svg(d))
    panels = root.findall(f"{SVG}g[@class='panel']")
    assert len(panels) == 2
    for k, A in enumerate(heads):
        assert len(cells(root, k)) == 9
        assert cell_texts(root, k) == {(i, j): x for i, row in enumerate(A) for j, x in enumerate(row)}
    assert [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "title"] == ["Head 1", "Head 2"]
    diagram = parse(svg(figure(d, "tokens")))
    assert len(diagram.findall(f"{SVG}g[@class='panel']")) == 2


def test_the_backward_pass_draws_dZ_on_a_signed_scale():
    d = example("backward", "en")
    root = parse(svg(figure(d, "dz")))
    texts = cell_texts(root)
    assert texts[(2, 2)] == "−1.837" and texts[(2, 0)] == "1.150"  # dZ of "it", as the step shows it
    fills = {(int(c.get("data-row")), int(c.get("data-col"))): c.get("fill") for c in cells(root)}
    assert fills[(2, 2)] == colours.signed_colour(Decimal("-1.837"), Decimal("1.848"))
    red, blue = fills[(0, 2)], fills[(0, 0)]  # −1.848, the largest, and 1.208
    assert int(red[1:3], 16) > int(red[5:7], 16) and int(blue[5:7], 16) > int(blue[1:3], 16)


def test_labels_are_escaped_in_svg_and_in_tikz():
    spec = load_spec(builtin.example_path("seed", "en"))
    d = derive(replace(spec, tokens=("<b>&", "a_b & 50%", "![x](symattn-figure:weights)")))
    root = parse(weights_svg(d))  # well-formed XML
    assert [t.text for t in root.findall(f".//{SVG}text[@class='row']")] == list(d.tokens)
    tex = render(d, "latex")
    assert r"{a\_b \& 50\%};" in tex and r"{\textless{}b\textgreater{}\&};" in tex
    page = derivation_page(d)
    assert page.count('<span class="figure"><svg') == 2  # a label that looks like our figure link stays text
    assert "![x](symattn-figure:weights)" not in render(d, "markdown", figure_link=str)


def test_the_same_figure_is_the_same_bytes_in_another_process(tmp_path):
    script = (
        "from symattn.derivation.derive import derive; from symattn.input.spec import load_spec;"
        "from symattn.input import builtin; from symattn.rendering.figures import all_figures; from symattn.rendering.svg import svg;"
        "from symattn.rendering.renderer import render;"
        "d = derive(load_spec(builtin.example_path('causal', 'zh')));"
        "print(''.join(svg(f) for f in all_figures(d)) + render(d, 'latex'))"
    )
    runs = [
        subprocess.run([sys.executable, "-c", script], capture_output=True, check=True, cwd=ROOT).stdout
        for _ in range(2)
    ]
    d = derive(load_spec(builtin.example_path("causal", "zh")))
    here = ("".join(svg(f) for f in all_figures(d)) + render(d, "latex") + "\n").encode("utf-8")
    assert runs[0] == runs[1] == here


def test_the_colour_scale_reads_in_greyscale_and_every_number_has_contrast():
    def contrast(a: str, b: str) -> float:
        la, lb = float(colours.luminance(a)), float(colours.luminance(b))
        return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)

    levels = [Decimal(k) / 64 for k in range(65)]
    shades = [colours.luminance(colours.weight_colour(w)) for w in levels]
    assert shades == sorted(shades, reverse=True) and len(set(shades)) == 65  # heavier weight, darker cell
    assert colours.weight_colour(Decimal(0)) == "#FFE945" and colours.weight_colour(Decimal(1)) == "#00204C"
    for fill in [colours.weight_colour(w) for w in levels] + [
        colours.signed_colour(2 * w - 1, Decimal(1)) for w in levels
    ]:
        assert contrast(fill, colours.ink(fill)) >= 4.5, fill


def test_big_documents_leave_the_numbers_out_and_say_so():
    n = 128
    tokens = [f"t{i}" for i in range(n)]
    rows = [[str((i * 7 + j * 3) % 5 - 2) for j in range(2)] for i in range(n)]
    d = derive(load_spec({"tokens": tokens, "Q": rows, "K": rows, "V": rows, "mask": "causal"}))
    heatmap = figure(d, "weights")
    assert heatmap.width <= LINE and heatmap.height <= TALL
    assert (heatmap.numbers, heatmap.label_step) == (False, 3)
    root = parse(svg(heatmap))
    assert len(cells(root)) == n * n and cell_texts(root) == {}
    assert sum("masked" in c.get("class") for c in cells(root)) == n * (n - 1) // 2
    markdown = render(d, "markdown", figure_link=str)
    assert "At 128 × 128 the cells are too small for their numbers: they are in $A$ above." in markdown
    assert "Only one token in 3 is labelled." in markdown
    small = figure(
        derive(load_spec({"tokens": tokens[:16], "Q": rows[:16], "K": rows[:16], "V": rows[:16]})), "weights"
    )
    assert small.numbers  # 16 × 16 still holds its numbers


# --- figures = "none", "weights" ------------------------------------------------


def test_figures_none_leaves_every_figure_out(tmp_path, capsys):
    d = example("causal", "en", figures="none")
    assert [s.kind for s in d.steps if s.kind == "picture"] == [] and d.figures == "none"
    tex = render(d, "latex", standalone=True)
    assert "tikz" not in tex and "A picture" not in tex
    assert '<span class="figure">' not in derivation_page(d)
    assert weights_svg(d) is None
    target = tmp_path / "doc.md"
    assert main(["render", "--example", "causal", "--lang", "en", "--figures", "none", "-o", str(target)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.md"]
    assert "![" not in target.read_text(encoding="utf-8")
    # the spec key does the same
    spec = load_spec({**_seed_mapping(), "figures": "none"})
    assert "tikz" not in render(derive(spec), "latex", standalone=True)
    with pytest.raises(SpecError) as info:
        load_spec({**_seed_mapping(), "figures": "some"})
    assert str(info.value) == "<dict>: figures: expected one of 'all', 'weights', 'none', got 'some'"


def _seed_mapping() -> dict:
    return {"Q": [[1, 0], [0, 1]], "K": [[1, 0], [0, 1]], "V": [[1, 0], [0, 1]]}


def test_figures_weights_draws_the_heatmaps_only():
    d = example("seed", "en", figures="weights")
    assert [f.id for f in all_figures(d)] == ["weights"]
    assert render(d, "latex").count(r"\begin{tikzpicture}") == 1
    assert [f.id for f in all_figures(example("backward", "en", figures="weights"))] == ["weights", "dz"]


def test_markdown_on_stdout_has_no_figure(capsys):
    assert main(["render", "--example", "seed", "--lang", "en"]) == 0
    out = capsys.readouterr().out
    assert "A picture" not in out and "![" not in out and ".svg" not in out
    assert main(["render", "--help"]) == 0
    assert "Markdown on stdout has no figure" in " ".join(capsys.readouterr().out.split())


# --- Markdown written to a file ---------------------------------------------------


def test_markdown_to_a_file_writes_the_svg_beside_it(tmp_path):
    target = tmp_path / "my notes.md"
    assert main(["render", "--example", "causal", "--lang", "zh", "-o", str(target)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my notes.md", "my notes.tokens.svg", "my notes.weights.svg"]
    text = target.read_text(encoding="utf-8")
    links = re.findall(r"!\[[^]]*\]\(([^)]*)\)", text)
    assert links == ["my%20notes.weights.svg", "my%20notes.tokens.svg"]
    d = example("causal", "zh")
    for fid in ("weights", "tokens"):
        assert (tmp_path / f"my notes.{fid}.svg").read_text(encoding="utf-8") == svg(figure(d, fid))
    assert "带斜线的格子被遮蔽，权重为 0。" in text


def test_markdown_to_a_file_never_writes_through_a_link(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere.svg"
    elsewhere.write_text("keep", encoding="utf-8")
    (tmp_path / "doc.weights.svg").symlink_to(elsewhere)
    target = tmp_path / "doc.md"
    assert main(["render", "--example", "seed", "-o", str(target)]) == 2
    assert (
        capsys.readouterr().err == f"symattn: {tmp_path / 'doc.weights.svg'}: is a link; refusing to write through it\n"
    )
    assert not target.exists() and not (tmp_path / "doc.tokens.svg").exists()
    assert elsewhere.read_text(encoding="utf-8") == "keep"


def test_markdown_to_a_device_has_no_figure(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["render", "--example", "seed", "--lang", "en", "-o", os.devnull]) == 0
    assert not Path(os.devnull + ".weights.svg").exists() and not Path("null.weights.svg").exists()
    assert list(tmp_path.iterdir()) == []


# --- TeX Live, pdftotext, Chromium --------------------------------------------------


def _compile(latex, tmp_path: Path, tex: str, engine: str) -> tuple[str, str]:
    pdf = latex(tex, engine, tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    needs("pdftotext")
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    return log, text


@pytest.mark.client
@pytest.mark.slow
@pytest.mark.parametrize("name, lang, engine", [("causal", "en", "pdflatex"), ("multihead", "zh", "xelatex")])
def test_standalone_latex_with_figures_compiles_and_shows_the_numbers(latex, tmp_path, name, lang, engine):
    d = example(name, lang)
    tex = render(d, "latex", standalone=True)
    assert r"\usepackage{tikz}" in tex and r"\begin{tikzpicture}" in tex
    log, text = _compile(latex, tmp_path, tex, engine)
    assert re.findall(r"Overfull \\[hv]box", log) == []
    page = text[text.index("权重图" if lang == "zh" else "A picture of the weights") :]
    words = page.split()
    for A in shown_A(render(d, "markdown")):
        for row in A:
            assert all(x in words for x in row), row


@pytest.mark.client
@pytest.mark.slow
@pytest.mark.parametrize(
    "tokens, lang, engine",
    [(16, "en", "pdflatex"), (24, "zh", "xelatex"), (128, "en", "pdflatex")],
)
def test_big_figures_fit_the_page(latex, tmp_path, tokens, lang, engine):
    # the pictures alone, at sizes up to the document limit: no overfull box, whatever the rest does
    names = [f"w{i}" for i in range(tokens)]
    rows = [[str((i * 7 + j * 3) % 5 - 2) for j in range(2)] for i in range(tokens)]
    d = derive(load_spec({"lang": lang, "tokens": names, "Q": rows, "K": rows, "V": rows, "mask": "causal"}))
    d = replace(d, steps=tuple(s for s in d.steps if s.kind == "picture"))
    log, text = _compile(latex, tmp_path, render(d, "latex", standalone=True), engine)
    assert re.findall(r"Overfull \\[hv]box", log) == []
    A = figure(d, "weights")
    if A.numbers:
        assert {c.text.text for p in A.panels for c in p.cells} <= set(text.split())


@pytest.mark.client
@pytest.mark.slow
def test_a_fragment_fits_a_narrow_column(latex, tmp_path):
    # an author's two-column article: the figure is scaled to the column, never past it
    fragment = render(example("causal", "en"), "latex")
    assert r"% needs \usepackage{tikz} and \usetikzlibrary{patterns} in the preamble" in fragment
    tex = (
        "\\documentclass[twocolumn]{article}\n\\usepackage{amsmath}\n\\usepackage{tikz}\n"
        "\\usetikzlibrary{patterns}\n\\begin{document}\n"
        + fragment[fragment.index("\\subsection*{A picture") : fragment.index("\\subsection*{Recap")]
        + "\\end{document}\n"
    )
    log, text = _compile(latex, tmp_path, tex, "pdflatex")
    assert re.findall(r"Overfull \\[hv]box", log) == []
    assert "0.638" in text.split()


@pytest.mark.client
@pytest.mark.slow
@pytest.mark.parametrize("name, lang", [("causal", "en"), ("multihead", "zh")])
def test_html_carries_the_heatmap_inline(browser, tmp_path, name, lang):  # noqa: F811 (the fixture)
    target = tmp_path / "page.html"
    assert main(["render", "--example", name, "--lang", lang, "-o", str(target)]) == 0
    d = example(name, lang)
    state = open_page(browser, target)
    assert state["errors"] == 0 and state["network"] == [] and state["scrollWidth"] <= state["innerWidth"]
    shown = browser.execute_script(
        """
        const svg = document.querySelector('span.figure svg.symattn-heatmap');
        const box = svg.getBoundingClientRect();
        return {
          cells: svg.querySelectorAll('rect.cell').length,
          numbers: Array.from(svg.querySelectorAll('text.number')).map(t => t.textContent),
          figures: document.querySelectorAll('span.figure svg').length,
          width: box.width, height: box.height,
        };
        """
    )
    heads = shown_A(render(d, "markdown"))
    assert shown["cells"] == sum(len(A) * len(A[0]) for A in heads)
    assert shown["numbers"] == [x for A in heads for row in A for x in row]
    assert shown["figures"] == 2  # the heatmap and the token diagram
    assert shown["width"] > 100 and shown["height"] > 100  # drawn, not collapsed
    logs = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert logs == []


def test_the_readme_pictures_are_current():
    d = example("causal", "en")
    for fid in ("weights", "tokens"):
        committed = (ROOT / "docs" / f"causal.{fid}.svg").read_text(encoding="utf-8")
        assert committed == svg(figure(d, fid)), "stale: run python docs/make_pictures.py"


def _heads_panels(tokens: int) -> list[tuple[Decimal, Decimal]]:
    rows = [[str((i + j) % 3 - 1) for j in range(4)] for i in range(tokens)]
    spec = {"tokens": [f"t{i}" for i in range(tokens)], "heads": 2, "Q": rows, "K": rows, "V": rows}
    (weights,) = [f for f in all_figures(derive(load_spec(spec))) if f.kind == "heatmap"]
    return [(p.x, p.y) for p in weights.panels]


def test_two_heads_heatmaps_sit_side_by_side_for_four_tokens_and_stack_for_five():
    # as docs/teacher.md says: as many to a row as prints them largest
    assert _heads_panels(4) == [(Decimal("0.00"), Decimal("0.00")), (Decimal("164.40"), Decimal("0.00"))]
    assert _heads_panels(5) == [(Decimal("0.00"), Decimal("0.00")), (Decimal("0.00"), Decimal("196.00"))]
