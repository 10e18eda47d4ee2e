"""Layout that fits the page: estimated widths, breaks, and a grid compiled with no overfull box."""

import re
from collections import Counter

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
        (r"\begin{bmatrix}1 & 2 \\ 3 & 4\end{bmatrix}", 30.6),
        (r"\dfrac{1}{3.028}", 25.2),
        (r"\text{sum}", 14.4),
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
def test_the_grid_fits_the_page(latex_each, tmp_path, lang, paper):
    documents = {
        f"{n}x{d} {variant}": render(derive(grid_spec(n, d, variant, lang, paper)), "latex", standalone=True)
        for n, d, variant in GRID
    }
    boxes = latex_each(documents, "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    assert {label: [w for kind, w in found if kind == "h" and w > 1] for label, found in boxes.items()} == {
        label: [] for label in documents
    }


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


# --- nothing off the page: long expansions, big matrices, read back with pdftotext --------------------


def pages_spec(n, d, variant, lang):
    """The sizes a teacher meets, and past them up to the document limits."""
    if variant == "heads4-all":
        return load_spec({**_raw(n, d, "heads4", lang), "expand": "all"})
    raw = {
        "lang": lang,
        "tokens": [f"t{i + 1}" for i in range(n)] if n > 8 else TOKENS[lang][:n],
        "Q": rows(n, d, 3),
        "K": rows(n, d, 5),
        "V": rows(n, d, 2),
    }
    if variant == "all-hand":
        raw.update(expand="all", rounding="hand")
    if variant == "all":
        raw["expand"] = "all"
    if variant == "backward-all":
        raw.update(expand="all", backward={"loss": "sum"})
    if variant == "variants":  # RoPE's scores before and after in blocks; ALiBi's 12 distances before its bias
        raw.update(heads=2, mask="causal", window=5, softcap=2, alibi=True, sinks=["0.5", "-0.25"], rope=True)
    if variant == "big-scores":
        raw.update(
            tokens=raw["tokens"][:2],
            Q=[["10", "0"], ["0", "1"]],
            K=[["10", "0"], ["0", "1"]],
            V=[["1", "0"], ["0", "1"]],
        )
    return load_spec(raw)


def _raw(n, d, variant, lang):
    h = int(variant[5])
    return {
        "lang": lang,
        "tokens": TOKENS[lang][:n],
        "X": rows(n, d, 3),
        "W_Q": rows(d, d, 5),
        "W_K": rows(d, d, 2),
        "W_V": rows(d, d, 4),
        "W_O": rows(d, d, 6),
        "heads": h,
    }


PAGES = [
    (6, 4, "all-hand", ("en", "zh")),
    (8, 8, "all", ("en", "zh")),
    (8, 8, "backward-all", ("en", "zh")),
    (8, 8, "heads4-all", ("en",)),
    (12, 4, "plain", ("en", "zh")),
    (12, 4, "variants", ("en",)),  # every score variant and RoPE, in two heads, 12 tokens
    (16, 16, "plain", ("en", "zh")),
    (16, 16, "all", ("en",)),
    (2, 2, "big-scores", ("en", "zh")),
    (32, 32, "plain", ("en",)),
    (8, 64, "plain", ("en",)),
    (128, 4, "plain", ("en",)),
    (4, 512, "plain", ("en",)),
]

_DIMENSION = re.compile(r"\d+(?:\.\d+)?(?:pt|em|ex|cm|\\[a-z]*(?:width|height))")
_DECIMAL = re.compile(r"\d+\.\d+")


def shown_numbers(tex: str) -> "Counter[str]":
    """Every decimal number the document sets (not its lengths)."""
    body = tex.split("\\begin{document}", 1)[1]
    body = re.sub(r"\\phantom\{[^{}]*\}", "", body)  # space, not ink
    # a picture's coordinates are not shown (its numbers are read back in test_figures)
    body = re.sub(r"\\begin\{tikzpicture\}.*?\\end\{tikzpicture\}", "", body, flags=re.S)
    return Counter(_DECIMAL.findall(_DIMENSION.sub("", body)))


def page_text(pdf) -> str:
    """pdftotext's text, without the page numbers."""
    import subprocess

    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    return "\n".join(line for line in text.splitlines() if not re.fullmatch(r"\s*\d+\s*", line))


@pytest.mark.client
@pytest.mark.slow
@pytest.mark.parametrize(
    "n, d, variant, lang",
    [(n, d, variant, lang) for n, d, variant, langs in PAGES for lang in langs],
)
def test_nothing_falls_off_the_page(latex, tmp_path, n, d, variant, lang):
    import shutil

    if not shutil.which("pdftotext"):
        pytest.skip("pdftotext not installed (poppler-utils)")
    derivation = derive(pages_spec(n, d, variant, lang))
    tex = render(derivation, "latex", standalone=True)
    pdf = latex(tex, "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    overfull = [float(w) for w in re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log)]
    assert (re.findall(r"Overfull \\vbox \(([\d.]+)pt too high\)", log), [w for w in overfull if w > 1]) == ([], [])
    text = page_text(pdf)
    # every number the source sets is on a page (pdftotext reads only what lies inside the page)
    found = Counter(_DECIMAL.findall(text))
    assert shown_numbers(tex) - found == Counter()
    # primes apart: pdftotext sets RoPE's Q′_t12 as Q, t12 and a prime on a line of its own
    text = re.sub(r"\s+", "", text).replace("′", "")
    # and every expanded dot product is there, by its name, in every head
    heads = [s.derivation for s in derivation.steps if s.kind == "head"] or [derivation]
    names = [
        f"Q{head.tokens[dot.row]}·K{head.key_tokens[dot.col]}="
        for head in heads
        for dot in next(step for step in head.steps if step.kind == "scores").dots
    ]
    assert [name for name in names if name not in text] == []
    assert len(names) == len(heads) * n * (n if "all" in variant else 1)


# --- the estimates against TeX's own measure ------------------------------------------------------

CALIBRATION = [
    r"\begin{bmatrix}\dfrac{0.475}{10.084} & \dfrac{0.958}{10.084} & \dfrac{1.666}{10.084}\end{bmatrix}",
    r"\begin{bmatrix}0.126 & 0.070 & 0.084 & -0.110\end{bmatrix}",
    r"\begin{bmatrix}-0.9 & -0.6 \\ 0.3 & 0.0\end{bmatrix}",
    r"[0.007,\ 0.022,\ -0.037,\ 0.051]",
    r"0.9\times 1.0 + 0.1\times 0.2 = 0.92",
    r"Q_{\text{t1}}\cdot K_{\text{t2}} = (-0.9)\times (-0.4)",
    r"0.6\times \left(-0.8\right) + \left(-0.7\right)\times \left(-0.3\right)",
    r"e^{0.354} \approx 1.425",
    r"\text{output after attention}",
    r"\begin{bmatrix}1\end{bmatrix}_{\text{columns 1–6 of 12}}",
]


@pytest.mark.client
def test_estimates_are_never_short_and_at_most_a_tenth_long(latex, tmp_path):
    # the layout trusts its estimates: one that is short lets a line run into the margin
    boxes = "\n".join(
        rf"\setbox0=\hbox{{$\displaystyle {tex}$}}\typeout{{WIDTH{i}=\the\wd0}}" for i, tex in enumerate(CALIBRATION)
    )
    document = (
        "\\documentclass{article}\\usepackage[T1]{fontenc}\\usepackage[utf8]{inputenc}\\usepackage{lmodern}"
        "\\usepackage{amsmath}\\begin{document}\n" + boxes + "\nx\n\\end{document}\n"
    )
    latex(document, "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8")
    measured = [float(re.search(rf"WIDTH{i}=([\d.]+)pt", log).group(1)) for i in range(len(CALIBRATION))]
    ratios = [round(tex_width(tex) / real, 2) for tex, real in zip(CALIBRATION, measured)]
    assert [r for r in ratios if not 0.98 <= r <= 1.1] == []


# --- fragments in an author's own document -----------------------------------------------------------


def host(fragment: str, cls: str, size: str) -> str:
    """An author's document around a fragment: their class and size, only the packages the guide names."""
    fonts = "\\usepackage[T1]{fontenc}\\usepackage[utf8]{inputenc}\\usepackage{lmodern}\n" if cls == "article" else ""
    return (
        f"\\documentclass[{size},a4paper]{{{cls}}}\n{fonts}\\usepackage{{amsmath}}\n"
        "\\usepackage{tikz}\\usetikzlibrary{patterns}\n"
        "\\begin{document}\n\\tableofcontents\n" + fragment + "\n\\end{document}\n"
    )


@pytest.mark.client
@pytest.mark.parametrize("size", ["10pt", "11pt", "12pt"])
@pytest.mark.parametrize("cls, lang", [("article", "en"), ("ctexart", "zh")])
def test_fragments_fit_the_authors_line(latex_each, tmp_path, size, cls, lang):
    from symattn.input.builtin import example_path

    documents = {}
    for n, d, variant in [(3, 2, "seed"), (3, 2, "backward"), (8, 8, "plain"), (6, 4, "heads2"), (4, 3, "causal")]:
        if variant in ("seed", "backward"):
            spec = load_spec(example_path(variant, lang))
        else:
            spec = grid_spec(n, d, variant, lang, "a4")
        documents[f"{n}x{d} {variant}"] = host(render(derive(spec), "latex"), cls, size)
    boxes = latex_each(documents, "pdflatex" if cls == "article" else "xelatex", tmp_path)
    assert {label: [(kind, w) for kind, w in found if kind == "v" or w > 1] for label, found in boxes.items()} == {
        label: [] for label in documents
    }


@pytest.mark.client
def test_a_bundle_names_the_body_that_overflows(latex_each, tmp_path):
    # the grid's documents share one TeX run: a box too wide is still the fault of its own document
    preamble = "\\documentclass{article}\\usepackage[a4paper]{geometry}\n"
    documents = {
        label: preamble + "\\begin{document}\n" + body + "\n\\end{document}\n"
        for label, body in [("fits", "A line."), ("too wide", "\\noindent\\hbox to 500pt{}\\par"), ("also fits", "B.")]
    }
    assert latex_each(documents, "pdflatex", tmp_path) == {"fits": [], "too wide": [("h", 81.74632)], "also fits": []}
