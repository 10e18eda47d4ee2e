"""Real clients: KaTeX parses every math span, TeX Live compiles every document."""

import pytest

from symattn.derivation.derive import derive
from symattn.input import builtin
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render

pytestmark = pytest.mark.client

SPECIAL = ["a_b & 50%", "x^2 {y} #1 $5 ~ \\ | < > *"]

CASES = {
    "seed": {},
    "hand-all": {"rounding": "hand", "expand": "all"},
    "special": {"tokens": SPECIAL + ["c"], "title": "Q&A: 100% {safe} $x$"},
    "scale-none": {"scale": "none", "focus": 1},
    "scale-number": {"scale": "1/2", "expand": "all"},
    "fractions": {"Q": [["1/3", "-2/7"], ["1e-2", "-0.5"], ["1", "1"]], "expand": "all"},
    # KaTeX's \text{} refuses Greek in strict mode (its math takes it); its ligatures would join -- and ''
    "greek": {"tokens": ["α", "λόγος", "Ϊά"], "title": "Ω -- ''q''", "expand": "all"},
    "ligatures": {"tokens": ["a--b", "''e''", "x`y"], "expand": "all"},
}


def spec_for(case: str, lang: str):
    base = dict(
        tokens=["小猫", "吃", "它"] if lang == "zh" else ["cat", "eats", "it"],
        Q=[["1.0", "0.0"], ["0.0", "1.0"], ["0.9", "0.1"]],
        K=[["1.0", "0.2"], ["0.1", "1.0"], ["0.8", "0.3"]],
        V=[[10, 0], [0, 10], [1, 1]],
        lang=lang,
    )
    return load_spec({**base, **CASES[case]})


@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_markdown_math_parses_in_katex(katex, case, lang):
    errors = katex(render(derive(spec_for(case, lang)), "markdown"))
    assert errors == []


def test_katex_catches_bad_math(katex):
    # the checker itself must be able to fail: raw CJK in math is rejected in strict mode
    assert katex("$$\n小猫\n$$\n") != []


@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("variant", [{}, {"expand": "all", "rounding": "hand"}])
def test_every_example_passes_katex_and_tex(katex, latex_each, tmp_path, lang, variant):
    documents, math = {}, {}
    for name in builtin.names():
        derivation = derive(load_spec(builtin.example_path(name, lang)).with_options(**variant))
        math[name] = katex(render(derivation, "markdown"))
        documents[name] = render(derivation, "latex", standalone=True)
    assert math == {name: [] for name in builtin.names()}
    latex_each(documents, "xelatex" if lang == "zh" else "pdflatex", tmp_path)  # compiles, every glyph set


@pytest.mark.parametrize("case", ["seed", "hand-all", "special"])
def test_chinese_latex_compiles_with_xelatex(latex, tmp_path, case):
    latex(render(derive(spec_for(case, "zh")), "latex", standalone=True), "xelatex", tmp_path)


@pytest.mark.parametrize("case", ["seed", "hand-all", "special", "fractions"])
def test_english_latex_compiles_with_pdflatex(latex, tmp_path, case):
    latex(render(derive(spec_for(case, "en")), "latex", standalone=True), "pdflatex", tmp_path)


def test_english_prose_with_chinese_labels_compiles_with_xelatex(latex, tmp_path):
    spec = load_spec(builtin.example_path("seed", "zh")).with_options(lang="en")
    latex(render(derive(spec), "latex", standalone=True), "xelatex", tmp_path)


def test_missing_glyphs_fail(latex, tmp_path):
    # cmr10 has no glyph 200: the helper must refuse, not pass silently
    doc = "\\documentclass{article}\\begin{document}\\font\\x=cmr10 \\x \\char200 ok\\end{document}\n"
    with pytest.raises(AssertionError, match="dropped glyphs"):
        latex(doc, "pdflatex", tmp_path)


def _report(lang):
    from symattn.checking.checker import check

    return check(None, str(builtin.example_path("seed-claims", lang)))


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_report_markdown_math_parses_in_katex(katex, lang):
    from symattn.rendering.renderer import render_report

    assert katex(render_report(_report(lang), "markdown")) == []


def test_chinese_report_compiles_with_xelatex(latex, tmp_path):
    from symattn.rendering.renderer import render_report

    latex(render_report(_report("zh"), "latex", standalone=True), "xelatex", tmp_path)


def test_english_report_compiles_with_pdflatex(latex, tmp_path):
    from symattn.rendering.renderer import render_report

    latex(render_report(_report("en"), "latex", standalone=True), "pdflatex", tmp_path)


def _bert(n: int, lang: str):
    """n tokens framed by [CLS] … [SEP], with a [MASK] on a later row; 12 dims, 11 value columns."""
    labels = ["[CLS]"] + [f"w{i}" for i in range(1, n - 1)] + ["[SEP]"]
    labels[2] = "[MASK]"
    rows = lambda r, c, k: [[f"{((i * 7 + j * k) % 19 - 9) / 10:.1f}" for j in range(c)] for i in range(r)]  # noqa: E731
    return load_spec(
        {
            "lang": lang,
            "tokens": labels,
            "Q": rows(n, 12, 3),
            "K": rows(n, 12, 5),
            "V": rows(n, 11, 2),
            "focus": "[SEP]",
            "expand": "all",
        }
    )


@pytest.mark.parametrize("n", [11, 16])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_wide_bert_style_specs_compile(katex, latex, tmp_path, n, lang):
    # more than 10 columns (amsmath's default) and labels that start with "[" after a line break
    spec = _bert(n, lang)
    latex(render(derive(spec), "latex", standalone=True), "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    assert katex(render(derive(spec), "markdown")) == []


def test_every_label_character_is_set_by_every_client(katex, latex, tmp_path):
    # every character a label may hold in the document's own fonts, as labels in both languages and all clients:
    # what pdflatex sets (Latin-1, Latin Extended-A, dashes, quotes) with pdflatex; all that Latin Modern has
    # (Vietnamese, signs, arrows) with xelatex, and with xelatex and ctex, whose xeCJK takes some punctuation
    from symattn.input import scripts
    from symattn.input.text import unsupported_character

    allowed = [
        chr(c)
        for lo, hi in scripts._LATIN_MODERN
        for c in range(lo, hi + 1)
        if c > 0x20 and not scripts.is_mark(chr(c)) and unsupported_character(chr(c)) is None
    ]
    assert len(allowed) == 575
    pdflatex = [ch for ch in allowed if scripts.is_pdflatex_text(ch)]
    cjk = ["小猫「吃」、。", "ひらがなカタカナ", "（全角）ＡＢＣ"]
    for name, lang, engine, pool, extra in (
        ("en-pdflatex", "en", "pdflatex", pdflatex, []),
        ("zh-pdflatex", "zh", "xelatex", pdflatex, cjk),
        ("en-xelatex", "en", "xelatex", allowed, []),
        ("zh-xelatex", "zh", "xelatex", allowed, cjk),
    ):
        tokens = ["a" + "".join(pool[i : i + 39]) for i in range(0, len(pool), 39)] + extra
        n = len(tokens)
        spec = load_spec({"lang": lang, "tokens": tokens, "Q": [[1]] * n, "K": [[1]] * n, "V": [[1]] * n})
        assert katex(render(derive(spec), "markdown")) == []
        folder = tmp_path / name
        folder.mkdir()
        # overfull (all that xelatex sets): a display of two 40-sign labels (Q_label · K_label), an inline vector of 15
        # numbers, a heading with a label, and a few prose lines with label lists; not fixed yet
        latex(render(derive(spec), "latex", standalone=True), engine, folder, boxes_checked=pool is pdflatex)
