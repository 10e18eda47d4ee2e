import re
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from symattn.derivation.derive import derive
from symattn.derivation.steps import STEP_KINDS
from symattn.input import builtin
from symattn.input.errors import RenderError
from symattn.input.languages import TEMPLATE_PATHS, languages
from symattn.input.spec import load_spec
from symattn.rendering.environment import environment, render_template
from symattn.rendering.escape import escape_katex_text, escape_latex, escape_markdown
from symattn.rendering.phrases import load_language
from symattn.rendering.renderer import FORMATS, render

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


def seed_spec(lang="zh"):
    return load_spec(builtin.example_path("seed", lang))


@pytest.mark.parametrize("name", builtin.names())
@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("fmt, ext", [("markdown", "md"), ("latex", "tex")])
def test_golden_examples(golden, name, lang, fmt, ext):
    spec = load_spec(builtin.example_path(name, lang))
    golden(f"{name}.{lang}.{ext}", render(derive(spec), fmt, standalone=(fmt == "latex")))


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_golden_seed_hand_all(golden, lang):
    spec = seed_spec(lang).with_options(rounding="hand", expand="all")
    golden(f"seed.hand-all.{lang}.md", render(derive(spec), "markdown"))


def test_output_is_deterministic():
    spec = seed_spec("zh")
    assert render(derive(spec), "latex") == render(derive(load_spec(builtin.example_path("seed", "zh"))), "latex")


def test_every_step_kind_has_a_template_in_every_format():
    # the format's own child <kind>.<format>.j2, or else the kind's one body <kind>.j2, which serves every format
    for kind in STEP_KINDS + ("document",):
        for fmt in FORMATS:
            own = TEMPLATES / f"{kind}.{fmt}.j2"
            found = Path(environment(fmt).get_template(own.name).filename)
            assert found.resolve() == (own if own.is_file() else TEMPLATES / f"{kind}.j2").resolve(), own.name


def test_a_missing_template_names_each_name_and_every_searched_path():
    with pytest.raises(RenderError) as info:
        render_template("nothing", "latex", "en")
    searched = ", ".join(str(p) for p in TEMPLATE_PATHS)
    assert str(info.value) == f"template 'nothing.latex.j2' (nor 'nothing.j2') not found; searched {searched}"


@pytest.mark.parametrize("first, second", [("markdown", "latex"), ("latex", "markdown")])
def test_a_template_shared_by_the_formats_writes_each_formats_math(monkeypatch, tmp_path, first, second):
    # the first format compiles the shared templates into the bytecode cache; the second, as a later process
    # would, reads that code from the cache, and still writes its own inline math (masking_diagonal.j2's 'i'|im)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    d = derive(load_spec(builtin.example_path("window", "en")))
    expected = {"latex": "query \\(i\\) may look", "markdown": "query $i$ may look"}
    try:
        for fmt in (first, second):
            environment.cache_clear()
            assert expected[fmt] in render(d, fmt)
    finally:
        environment.cache_clear()
    assert len(list(tmp_path.rglob("__jinja2_*.cache"))) > 30


BLOCKS = (
    "((( t('x') )))\n((* filter display *))\nM = 1\n((* endfilter *))\n"
    "((* filter display(above=true, below=true) *))\nx\n((* endfilter *))\n"
    "((* filter items *))\na\nb\n((* endfilter *))\n"
    "((* filter items(loose=true) *))\nc\n((* endfilter *))\n"
    "((* filter table(['l', 'p{2em}']) *))\n((( ['k', 'w']|row )))\n((( ['a', '1']|row )))\n((* endfilter *))\n"
)


@pytest.mark.parametrize(
    "fmt, expected",
    [
        (
            "latex",
            "X\n\\[\nM = 1\n\\]\n\\[\nx\n\\]\n\\begin{itemize}\n\\item a\n\\item b\n\\end{itemize}\n"
            "\\begin{itemize}\n\\item c\n\\end{itemize}\n"
            "\\noindent\\begin{tabular}{lp{2em}}\n\\hline\nk & w \\\\\n\\hline\na & 1 \\\\\n\\hline\n\\end{tabular}\n",
        ),
        ("markdown", "X\n$$\nM = 1\n$$\n\n$$\nx\n$$\n\n- a\n- b\n\n- c\n| k | w |\n|---|---|\n| a | 1 |\n"),
    ],
)
def test_the_block_markup_of_each_format(fmt, expected):
    template = environment(fmt).from_string(BLOCKS)
    assert template.render(t=lambda key: key.upper()) == expected


def _keys(node, prefix=""):
    if isinstance(node, dict):
        return {k for key, value in node.items() for k in _keys(value, f"{prefix}{key}.")}
    return {prefix.rstrip(".")}


def test_every_phrase_exists_in_every_language():
    files = sorted((TEMPLATES / "lang").glob("*.toml"))
    assert [f.stem for f in files] == ["en", "zh"] == languages()
    keys = [_keys(tomllib.loads(f.read_text(encoding="utf-8"))) for f in files]
    assert keys[0] == keys[1]


def test_every_phrase_used_by_a_template_exists():
    used = set()
    for path in TEMPLATES.glob("*.j2"):
        used |= set(re.findall(r"\bt(?:m)?(?:\.raw)?\('([a-z_.]+)'", path.read_text(encoding="utf-8")))
    used = {key for key in used if not key.endswith(".")} | {"rounding.exact", "rounding.hand"}
    for lang in languages():
        known = _keys(load_language(lang))
        assert used - known == set(), lang


SPECIAL = "a_b & 50%"


@pytest.mark.parametrize(
    "text, latex, markdown, katex",
    [
        (SPECIAL, r"a\_b \& 50\%", r"a\_b \& 50%", r"a\_b \& 50\%"),
        (
            "x^2 {y} #1 $5 ~",
            r"x\textasciicircum{}2 \{y\} \#1 \$5 \textasciitilde{}",
            r"x^2 \{y\} \#1 \$5 \~",
            r"x\textasciicircum{}2 \{y\} \#1 \$5 \textasciitilde{}",
        ),
        (
            r"a\b|c<d>*e*",
            r"a\textbackslash{}b\textbar{}c\textless{}d\textgreater{}{*}e{*}",
            r"a\\b\|c\<d\>\*e\*",
            r"a\textbackslash{}b\textbar{}c\textless{}d\textgreater{}{*}e{*}",
        ),
        ("[CLS]", "{[}CLS]", r"\[CLS\]", "{[}CLS]"),
        ("≈ → ×", r"\ensuremath{\approx} \ensuremath{\rightarrow} \ensuremath{\times}", "≈ → ×", "≈ → ×"),
    ],
)
def test_escape_tables(text, latex, markdown, katex):
    assert escape_latex(text) == latex
    assert escape_markdown(text) == markdown
    assert escape_katex_text(text) == katex


def special_spec(lang="en"):
    return load_spec(
        {
            "Q": [[1, 0], [0, 1]],
            "K": [[1, 0], [0, 1]],
            "V": [[1, 2], [3, 4]],
            "tokens": [SPECIAL, "x^2 {y} #1 $5 ~"],
            "title": "Q&A: 100% {safe}",
            "lang": lang,
        }
    )


def test_special_labels_come_out_literally_in_markdown():
    text = render(derive(special_spec()), "markdown")
    assert text.startswith("# Q\\&A: 100% \\{safe\\}\n")
    assert "| token | $Q$ |\n|---|---|\n| a\\_b \\& 50% | $[1,\\ 0]$ |\n" in text
    assert "\\cdot K_{\\text{a\\_b \\& 50\\%}} &= " in text
    assert SPECIAL not in text


def test_special_labels_come_out_literally_in_latex():
    text = render(derive(special_spec()), "latex")
    assert text.startswith("\\section*{\\raggedright Q\\&A: 100\\% \\{safe\\}}\n")
    assert "a\\_b \\& 50\\% & \\([1,\\ 0]\\) \\\\\n" in text
    assert SPECIAL not in text


def test_unknown_language_names_the_searched_paths(seed):
    spec = load_spec(seed)
    spec = replace(spec, document=replace(spec.document, lang="fr"))  # past the spec's own check, as the API allows
    with pytest.raises(RenderError) as info:
        render(derive(spec))
    searched = ", ".join(str(p / "lang") for p in TEMPLATE_PATHS)
    assert str(info.value) == f"no language 'fr': lang/fr.toml not found; searched {searched}"


def test_unknown_format(seed):
    with pytest.raises(RenderError) as info:
        render(derive(load_spec(seed)), "html")
    assert str(info.value) == "unknown format 'html'; expected one of markdown, latex"


def test_expand_all_expands_every_product():
    text = render(derive(seed_spec("zh").with_options(expand="all")), "markdown")
    assert text.count(r"\cdot K_{") == 9
    assert text.count(r"\text{输出}_{") == 9  # 3 weighted sums, 6 entries of the matrix form
    assert (
        "\\text{输出}_{\\text{它},1} &\\approx 0.403\\times 10 + 0.240\\times 0 + 0.357\\times 1 \\approx 4.384" in text
    )


def test_negative_operands_get_parentheses():
    spec = load_spec({"Q": [["-0.5", "1/3"]], "K": [["2", "1e-2"]], "V": [[1]]})
    text = render(derive(spec), "markdown")
    assert (
        r"Q_{\text{t1}}\cdot K_{\text{t1}} &= \left(-0.5\right)\times 2 + \left(\frac{1}{3}\right)"
        r"\times \left(1\times 10^{-2}\right) \approx -0.997"
    ) in text


@pytest.mark.parametrize(
    "scale, formula, en, zh",
    [
        (
            '"none"',
            r"\mathrm{softmax}\!\left(QK^\top\right)V",
            "- no scaling here: the softmax takes the scores as they are\n",
            "- 本例不缩放：softmax 直接作用于分数\n",
        ),
        (
            '"1/2"',
            r"\mathrm{softmax}\!\left(\frac{1}{2}\,QK^\top\right)V",
            r"- multiplying by $\frac{1}{2}$ rescales the scores before the softmax" + "\n",
            r"- 乘以 $\frac{1}{2}$：在 softmax 之前缩放分数" + "\n",
        ),
        ("1", r"\mathrm{softmax}\!\left(QK^\top\right)V", "- no scaling here:", "- 本例不缩放："),  # × 1: none
    ],
)
def test_the_closing_formula_and_the_recap_say_the_specs_own_scaling(tmp_path, scale, formula, en, zh):
    for lang, line in (("en", en), ("zh", zh)):
        spec = tmp_path / f"{lang}.toml"
        spec.write_text(
            f'lang = "{lang}"\nQ = [[1, 0], [0, 1]]\nK = [[1, 0], [0, 1]]\nV = [[1, 0], [0, 1]]\nscale = {scale}\n'
            'figures = "none"\n',
            encoding="utf-8",
        )
        text = render(derive(load_spec(spec)), "markdown")
        assert formula in text and r"\sqrt{d_k}}\right)V" not in text
        assert line in text
        assert "cools" not in text and "降温" not in text
