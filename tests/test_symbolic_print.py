"""The LaTeX of symbolic values: exact strings for the printer, and the built-in example end to end."""

import re

import pytest
import sympy

from symattn.derivation.derive import derive
from symattn.input import builtin
from symattn.input.formula import symbol
from symattn.input.spec import load_spec
from symattn.rendering.printing import latex, logistic, over_root
from symattn.rendering.renderer import render

a, b, c, x, v1 = (symbol(n) for n in ("a", "b", "c", "x", "v_1"))
r2 = sympy.sqrt(2)
za, zb, zc = r2 * a / 2, r2 * b / 2, r2 * c / 2  # scores a, b, c divided by √2 (SymPy writes √2·a/2)
ea, eb, ec = sympy.exp(za), sympy.exp(zb), sympy.exp(zc)

# (expression, display LaTeX, inline LaTeX)
TABLE = [
    # the scale as a division by √d_k, not √2/2
    (za, r"\frac{a}{\sqrt{2}}", r"a/\sqrt{2}"),
    (-za, r"- \frac{a}{\sqrt{2}}", r"-a/\sqrt{2}"),
    (3 * za, r"\frac{3 a}{\sqrt{2}}", r"3 a/\sqrt{2}"),
    (r2 * a / 4, r"\frac{a}{2 \sqrt{2}}", r"a/(2 \sqrt{2})"),  # d_k = 8
    (sympy.sqrt(3) * a / 3, r"\frac{a}{\sqrt{3}}", r"a/\sqrt{3}"),
    (sympy.Rational(23, 50) * r2, r"\frac{23}{25 \sqrt{2}}", r"23/(25 \sqrt{2})"),
    (r2, r"\sqrt{2}", r"\sqrt{2}"),  # nothing to divide by
    (za + 1, r"\frac{a}{\sqrt{2}} + 1", r"a/\sqrt{2} + 1"),
    # exp of a scaled symbol, of a sum, of a long sum, of a negative
    (ea, r"e^{a/\sqrt{2}}", r"e^{a/\sqrt{2}}"),
    (sympy.exp(za + zb), r"e^{(a + b)/\sqrt{2}}", r"e^{(a + b)/\sqrt{2}}"),
    (
        sympy.exp(za + zb + zc + r2 * x / 2),
        r"\exp\!\left(\frac{a + b + c + x}{\sqrt{2}}\right)",
        r"\exp\!\left((a + b + c + x)/\sqrt{2}\right)",
    ),
    (sympy.exp(-za), r"e^{-a/\sqrt{2}}", r"e^{-a/\sqrt{2}}"),
    (sympy.exp(a / 2), r"e^{a/2}", r"e^{a/2}"),
    (sympy.exp(sympy.exp(a / 2)), r"e^{e^{a/2}}", r"e^{e^{a/2}}"),
    # the two-key softmax in its logistic form
    (ea / (ea + eb), r"\frac{1}{1 + e^{(b - a)/\sqrt{2}}}", r"1/(1 + e^{(b - a)/\sqrt{2}})"),
    (eb / (ea + eb), r"\frac{1}{1 + e^{(a - b)/\sqrt{2}}}", r"1/(1 + e^{(a - b)/\sqrt{2}})"),
    (v1 * ea / (ea + eb), r"\frac{v_{1}}{1 + e^{(b - a)/\sqrt{2}}}", r"v_{1}/(1 + e^{(b - a)/\sqrt{2}})"),
    (-v1 * ea / (ea + eb), r"- \frac{v_{1}}{1 + e^{(b - a)/\sqrt{2}}}", r"-v_{1}/(1 + e^{(b - a)/\sqrt{2}})"),
    (ea / (ea + eb) / 3, r"\frac{1}{3 \left(1 + e^{(b - a)/\sqrt{2}}\right)}", r"1/(3 (1 + e^{(b - a)/\sqrt{2}}))"),
    # ... but not with three keys, nor with a numerator that is a sum
    (
        ea / (ea + eb + ec),
        r"\frac{e^{a/\sqrt{2}}}{e^{a/\sqrt{2}} + e^{b/\sqrt{2}} + e^{c/\sqrt{2}}}",
        r"e^{a/\sqrt{2}}/(e^{a/\sqrt{2}} + e^{b/\sqrt{2}} + e^{c/\sqrt{2}})",
    ),
    (
        (v1 * ea + eb) / (ea + eb),
        r"\frac{v_{1} e^{a/\sqrt{2}} + e^{b/\sqrt{2}}}{e^{a/\sqrt{2}} + e^{b/\sqrt{2}}}",
        r"(v_{1} e^{a/\sqrt{2}} + e^{b/\sqrt{2}})/(e^{a/\sqrt{2}} + e^{b/\sqrt{2}})",
    ),
    # roots, powers, sums
    (sympy.sqrt(1 + r2), r"\sqrt{1 + \sqrt{2}}", r"\sqrt{1 + \sqrt{2}}"),
    (sympy.sqrt(a + sympy.sqrt(b)), r"\sqrt{a + \sqrt{b}}", r"\sqrt{a + \sqrt{b}}"),
    (a**-2, r"\frac{1}{a^{2}}", r"1/a^{2}"),
    (1 / sympy.sqrt(a), r"\frac{1}{\sqrt{a}}", r"1/\sqrt{a}"),
    (a ** sympy.Rational(3, 2), r"a^{3/2}", r"a^{3/2}"),
    (a ** sympy.Rational(-3, 2), r"a^{-3/2}", r"a^{-3/2}"),
    (2 ** (a / 3), r"2^{a/3}", r"2^{a/3}"),
    (a / (2 * b), r"\frac{a}{2 b}", r"a/(2 b)"),
    (1 / (a + b), r"\frac{1}{a + b}", r"1/(a + b)"),
    (sympy.Rational(1, 2), r"\frac{1}{2}", r"1/2"),
    (sympy.Rational(-1, 2), r"- \frac{1}{2}", r"-1/2"),
    (b - a, r"b - a", r"b - a"),
    (-a - b, r"- a - b", r"-a - b"),
]


@pytest.mark.parametrize("expr, display, inline", TABLE, ids=[str(row[0]) for row in TABLE])
def test_printer(expr, display, inline):
    assert latex(expr) == display
    assert latex(expr, inline=True) == inline


@pytest.mark.parametrize("expr", [row[0] for row in TABLE], ids=[str(row[0]) for row in TABLE])
def test_no_fraction_in_a_superscript_and_none_inline(expr):
    assert not re.search(r"\^\{[^}]*\\frac", latex(expr))
    assert r"\frac" not in latex(expr, inline=True)


def test_the_rewrites_keep_the_value():
    # the logistic form comes with SymPy's proof; check it independently once more
    c_, d = logistic(v1 * ea / (ea + eb))
    assert sympy.simplify(v1 * ea / (ea + eb) - c_ / (1 + sympy.exp(d))) == 0
    assert (c_, d) == (v1, sympy.expand(zb - za))
    numerator, r, m = over_root(sympy.expand(zb - za))
    assert (numerator, r, m) == (b - a, 1, 2) and sympy.expand(numerator / (r * sympy.sqrt(m)) - (zb - za)) == 0
    assert logistic(ea / (ea + eb + ec)) is None
    assert logistic(ea / (ea + 2 * eb)) is None  # 2e^y is not an exponential alone: no logistic form claimed


def test_output_is_deterministic():
    expr = v1 * ea / (ea + eb)
    assert len({latex(expr) for _ in range(5)}) == 1


# --- end to end --------------------------------------------------------------


def _outputs(lang, **options):
    spec = load_spec(builtin.example_path("symbolic", lang)).with_options(**options)
    d = derive(spec)
    return render(d, "markdown"), render(d, "latex", standalone=True)


def _table_cells(markdown):
    return [line for line in markdown.splitlines() if line.startswith("|")]


@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("options", [{}, {"expand": "all"}], ids=["focus", "all"])
def test_builtin_symbolic_example_reads_well(lang, options):
    markdown, tex = _outputs(lang, **options)
    for text in (markdown, tex):
        assert r"^{\frac" not in text
        assert not re.search(r"\^\{[^}]*\\frac", text)
        assert r"\frac{\sqrt{2}" not in text  # the scale is written as a division by √2
    assert r"\frac{1}{1 + e^{(b - a)/\sqrt{2}}}" in markdown  # the logistic form of the two-key softmax
    assert r"\left[\frac{v_{1}}{1 + e^{(b - a)/\sqrt{2}}}" in markdown  # brackets grow around fractions
    assert all(r"\frac" not in line for line in _table_cells(markdown))
    assert r"[v_{1}/(1 + e^{(b - a)/\sqrt{2}}),\allowbreak\ v_{2}/(1 + e^{(a - b)/\sqrt{2}})]" in markdown
    tabular = re.findall(r"\\begin\{tabular\}.*?\\end\{tabular\}", tex, re.S)
    assert tabular and all(r"\frac" not in t for t in tabular)


def test_numeric_vectors_keep_plain_brackets():
    markdown, _ = _outputs("en")
    assert r"\left[" not in markdown.split("## With values")[1]


HARD = {
    "tokens": ["p", "q", "r"],
    "focus": "p",  # three keys, d_k = 3, a long exponent, fractions in K and V
    "Q": [["a", "0", "1"], ["0", "1", "0"], ["1", "1", "1"]],
    "K": [["b + c + d + f", "0", "1"], ["(a + b)/2", "1", "0"], ["-a", "c^2", "1/3"]],
    "V": [["v_1", "1/2"], ["0", "v_2"], ["1", "sqrt(w)"]],
}


def test_a_harder_spec_has_no_fraction_in_a_superscript_or_a_table():
    for lang in ("zh", "en"):
        d = derive(load_spec({**HARD, "lang": lang}).with_options(expand="all"))
        markdown, tex = render(d, "markdown"), render(d, "latex", standalone=True)
        for text in (markdown, tex):
            assert not re.search(r"\^\{[^}]*\\frac", text)
        assert all(r"\frac" not in line for line in _table_cells(markdown))


@pytest.mark.client
@pytest.mark.parametrize("lang", ["zh", "en"])
def test_a_harder_spec_passes_katex_and_tex(katex, latex, tmp_path, lang):
    d = derive(load_spec({**HARD, "lang": lang}).with_options(expand="all"))
    assert katex(render(d, "markdown")) == []
    # overfull: symbolic fractions 250 pt wide (a vector of two of them, a sum's "= fraction" end, one in a
    # block of a matrix) run 3-164 pt past the line even at \scriptsize; not fixed yet
    latex(render(d, "latex", standalone=True), "xelatex" if lang == "zh" else "pdflatex", tmp_path, boxes_checked=False)
