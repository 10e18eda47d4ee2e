"""Layout that fits the page: estimated widths, breaks, and a grid compiled with no overfull box."""

import re

import pytest

from symattn.derivation.derive import derive
from symattn.input.spec import load_spec
from symattn.rendering.layout import side_by_side, sum_lines, tex_width
from symattn.rendering.renderer import render

from .test_export import browser, open_page  # noqa: F401 (a fixture)


@pytest.mark.parametrize(
    "tex, width",
    [
        ("0.92", 17.8),
        (r"0.9\times 1.0", 37.8),
        (r"\begin{bmatrix}1 & 2 \\ 3 & 4\end{bmatrix}", 28.0),
        (r"\dfrac{1}{3.028}", 25.2),
        (r"\text{sum}", 15.6),
    ],
)
def test_estimated_widths(tex, width):
    assert round(tex_width(tex), 1) == width


def test_a_long_sum_continues_under_its_equals_sign():
    terms = [rf"0.{i}\times 0.{i}" for i in range(1, 10)]
    assert sum_lines(terms, r"Q_{\text{it}}\cdot K_{\text{cat}} &= ", " = 2.85") == (
        r"Q_{\text{it}}\cdot K_{\text{cat}} &= 0.1\times 0.1 + 0.2\times 0.2 + 0.3\times 0.3 + 0.4\times 0.4"
        r" + 0.5\times 0.5 \\"
        "\n"
        r"&\quad + 0.6\times 0.6 + 0.7\times 0.7 + 0.8\times 0.8 + 0.9\times 0.9 = 2.85"
    )


def test_a_short_sum_stays_on_one_line():
    assert (
        sum_lines([r"0.9\times 1.0", r"0.1\times 0.2"], "S &= ", " = 0.92")
        == r"S &= 0.9\times 1.0 + 0.1\times 0.2 = 0.92"
    )


def test_matrices_stack_only_when_they_do_not_fit():
    small = r"\begin{bmatrix}1 & 0\end{bmatrix}"
    assert side_by_side(["Q=" + small, "K=" + small]) == "Q=" + small + r",\; K=" + small
    wide = r"\begin{bmatrix}" + " & ".join(["-0.12"] * 6) + r"\end{bmatrix}"  # fits alone, not twice
    assert side_by_side(["Q=" + wide, "K=" + wide]) == (
        r"\begin{gathered}Q=" + wide + r" \\ K=" + wide + r"\end{gathered}"
    )


# --- the grid: every kind of derivation up to 8 × 8 × 8, compiled, with no overfull box over 1 pt ------


def rows(r, c, k, decimals=1):
    return [[f"{((i * 7 + j * k) % 19 - 9) / 10**decimals:.{decimals}f}" for j in range(c)] for i in range(r)]


TOKENS = {
    "zh": ["小猫", "吃", "鱼", "它", "在", "家", "睡", "觉"],
    "en": ["the", "cat", "sat", "on", "a", "mat", "all", "day"],
}


def grid_spec(n, d, variant, lang, paper):
    spec = {
        "lang": lang,
        "paper": paper,
        "tokens": TOKENS[lang][:n],
        "Q": rows(n, d, 3),
        "K": rows(n, d, 5),
        "V": rows(n, d, 2),
    }
    if variant == "causal":
        spec["mask"] = "causal"
    if variant == "two-decimals":
        spec.update(Q=rows(n, d, 3, 2), K=rows(n, d, 5, 2), V=rows(n, d, 2, 2))
    if variant == "all-hand":
        spec.update(expand="all", rounding="hand")
    if variant == "cross":
        spec.update(Q=rows(n - 1, d, 3), tokens=TOKENS[lang][: n - 1], key_tokens=[t + "'" for t in TOKENS[lang][:n]])
    if variant == "symbolic":
        spec.update(
            tokens=TOKENS[lang][:2],
            Q=[["a", "1"], ["0", "b"]],
            K=[["1", "a"], ["b", "1"]],
            V=[["v_1", "0"], ["0", "v_2"]],
            expand="all",
        )
    if variant.startswith("heads") or variant == "projection":
        h = int(variant[5:]) if variant.startswith("heads") else 1
        spec = {
            "lang": lang,
            "paper": paper,
            "tokens": TOKENS[lang][:n],
            "X": rows(n, d, 3),
            "W_Q": rows(d, d, 5),
            "W_K": rows(d, d, 2),
            "W_V": rows(d, d, 4),
            "heads": h,
        }
        if h > 1:
            spec["W_O"] = rows(d, d, 6)
    return load_spec(spec)


GRID = [
    (8, 8, "plain"),
    (8, 8, "two-decimals"),
    (8, 8, "all-hand"),
    (4, 3, "causal"),
    (8, 5, "cross"),
    (8, 8, "heads4"),
    (8, 8, "projection"),
    (6, 4, "heads2"),
    (2, 2, "plain"),
    (2, 2, "symbolic"),
]


@pytest.mark.client
@pytest.mark.parametrize("paper", ["a4", "letter"])
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("n, d, variant", GRID)
def test_the_grid_fits_the_page(latex, tmp_path, n, d, variant, lang, paper):
    tex = render(derive(grid_spec(n, d, variant, lang, paper)), "latex", standalone=True)
    latex(tex, "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    overfull = [float(w) for w in re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log)]
    assert [w for w in overfull if w > 1] == []


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("n, d, variant", GRID)
def test_the_grid_in_a_browser(browser, tmp_path, n, d, variant, lang):
    # the same grid as one offline HTML page each, in Chromium at 1000 px
    from symattn.rendering.html import derivation_page

    page = tmp_path / "grid.html"
    page.write_text(derivation_page(derive(grid_spec(n, d, variant, lang, "a4"))), encoding="utf-8")
    state = open_page(browser, page)
    assert (state["errors"], state["typeset"] == state["math"], "$" in state["text"]) == (0, True, False)
    assert state["scrollWidth"] <= state["innerWidth"] == 1000
    assert state["network"] == []
