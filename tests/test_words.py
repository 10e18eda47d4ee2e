"""Words and numbers true to the page: math names set as math, scaling as a division, in both languages."""

import pytest

from symattn.cli.commands import main
from symattn.derivation.derive import derive
from symattn.input import builtin
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render


def _documents(lang):
    for name in builtin.names():
        spec = load_spec(builtin.example_path(name, lang)).with_options(backward=True, expand="all")
        derivation = derive(spec)
        for fmt in ("markdown", "latex"):
            yield name, fmt, render(derivation, fmt)


@pytest.fixture(scope="module")
def documents():
    """_documents(lang), made once for the module's tests (every example, both formats, is seconds of work)."""
    made: dict[str, list] = {}

    def get(lang):
        if lang not in made:
            made[lang] = list(_documents(lang))
        return made[lang]

    return get


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_math_name_is_escaped_text(documents, lang):
    # no label of the built-in examples has an underscore: an escaped one is a math name set as text
    for name, fmt, text in documents(lang):
        assert "\\_" not in text, (name, fmt)


@pytest.mark.parametrize(
    "lang, fmt, row",
    [
        ("en", "markdown", "| $dW_Q$ | $3\\times 2$ | how fast the loss rises with each entry of $W_Q$ (training"),
        ("zh", "markdown", "| $dW_Q$ | $3\\times 2$ | $W_Q$ 的每个元素增大时"),
        (
            "en",
            "latex",
            "\\(dW_Q\\) & \\(3\\times 2\\) & how fast the loss rises with each entry of \\(W_Q\\) (training",
        ),
        ("zh", "latex", "\\(dW_Q\\) & \\(3\\times 2\\) & \\(W_Q\\) 的每个元素增大时"),
    ],
)
def test_the_gradient_recap_sets_the_weights_as_math(lang, fmt, row):
    spec = load_spec(builtin.example_path("projection", lang)).with_options(backward=True)
    assert row in render(derive(spec), fmt)


def test_the_chinese_projections_name_every_weight_as_math():
    spec = load_spec(builtin.example_path("projection", "zh")).with_options(backward=True)
    assert "所以权重的梯度是 $dW_Q = X^\\top dQ$，$W_K$、$W_V$ 同理；" in render(derive(spec), "markdown")


@pytest.mark.parametrize("lang, fmt", [("en", "markdown"), ("zh", "markdown"), ("en", "latex"), ("zh", "latex")])
def test_reports_set_the_quantity_names_as_math(capsys, lang, fmt):
    assert main(["check", "--example", "--lang", lang, "--format", fmt]) == 1  # the example has wrong numbers
    text = capsys.readouterr().out
    if fmt == "markdown":
        assert "| 1 | $\\sqrt{d_k}$ |  |  | 1.414 |" in text and "$S/\\sqrt{d_k}$ | " in text
    else:
        assert "\\(\\sqrt{d_k}\\)" in text and "\\(S/\\sqrt{d_k}\\)" in text
    assert "d\\_k" not in text


@pytest.mark.parametrize(
    "lang, setup, heads",
    [
        (
            "en",
            "Dimension $d_k = 2$; the scores are divided by $\\sqrt{d_k} = \\sqrt{2} \\approx 1.414$.",
            "2 heads: $d_{model} = 4$, each head has $d_{head} = 2$, and its scores are divided by $\\sqrt{d_{head}}$.",
        ),
        (
            "zh",
            "维度 $d_k = 2$，分数除以 $\\sqrt{d_k} = \\sqrt{2} \\approx 1.414$。",
            "2 个头：$d_{model} = 4$，每个头 $d_{head} = 2$，各自的分数除以 $\\sqrt{d_{head}}$。",
        ),
    ],
)
def test_the_scores_are_divided_by_the_root(lang, setup, heads):
    text = render(derive(load_spec(builtin.example_path("multihead", lang))), "markdown")
    assert setup in text and heads in text


@pytest.mark.parametrize("lang, words", [("en", ("scaling factor", "scaled by", "scale by")), ("zh", ("缩放因子",))])
def test_no_document_says_scale_by(documents, lang, words):
    for name, fmt, text in documents(lang):
        assert [w for w in words if w in text] == [], (name, fmt)


@pytest.mark.parametrize(
    "name, rounding, line",
    [
        # the Jacobian's entries are rounded, so dZ is not equal to the shown products: ≈ from the start
        ("backward", "exact", r"dZ_{\text{it},\text{cat}} &\approx 0.241\times 10 + \left(-0.097\right)\times 10"),
        ("backward", "exact", r"r_{\text{it}} = \sum_k dA_k\,\alpha_k &\approx 10\times 0.403"),
        ("backward", "exact", r"dZ_{\text{it},\text{cat}} &\approx 0.403\times\left( 10 - 7.144\right) \approx 1.150"),
        ("multihead", "exact", r"\text{Output}_{\text{it},1} &\approx 0.699\times 0.5 + 0.301\times 0.0"),
        # by hand the Jacobian is the exact product of the shown weights, and the output of the shown concat
        ("backward", "hand", r"dZ_{\text{it},\text{cat}} &= 0.240591\times 10 + \left(-0.096720\right)\times 10"),
        ("multihead", "hand", r"\text{Output}_{\text{it},1} &= 0.6994\times 0.5 + 0.3006\times 0.0"),
        # exact inputs: =
        ("seed", "exact", r"Q_{\text{it}}\cdot K_{\text{cat}} &= 0.9\times 1.0 + 0.1\times 0.2 = 0.92"),
    ],
)
def test_a_line_of_rounded_terms_starts_with_approx(name, rounding, line):
    spec = load_spec(builtin.example_path(name, "en")).with_options(rounding=rounding)
    assert line in render(derive(spec), "markdown")


def _symbolic(lang, fmt, **options):
    spec = load_spec(builtin.example_path("symbolic", lang)).with_options(**options)
    return render(derive(spec), fmt)


@pytest.mark.parametrize("fmt", ["markdown", "latex"])
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("expand", ["focus", "all"])
def test_symbolic_steps_print_no_line_that_repeats_itself(lang, fmt, expand):
    text = _symbolic(lang, fmt, expand=expand)
    lines = [line.rstrip(" \\") for line in text.splitlines() if "&=" in line]
    assert [line for line in lines if line.split("&=")[0].strip() == line.split("&=")[1].strip()] == []
    assert "e^{a/\\sqrt{2}} &=" not in text
    sum_word = {"en": "sum", "zh": "和"}[lang]
    assert f"\\text{{{sum_word}}} &= e^{{a/\\sqrt{{2}}}} + e^{{b/\\sqrt{{2}}}}" in text  # the sum names each e^z


@pytest.mark.parametrize(
    "lang, fmt, lead",
    [
        ("en", "markdown", "These are the weights $\\alpha_{\\text{x1}}$ of step 3, in the logistic form "),
        ("zh", "markdown", "这就是步骤 3 的权重 $\\alpha_{\\text{我}}$，写成逻辑斯谛形式 "),
        ("en", "latex", "These are the weights \\(\\alpha_{\\text{x1}}\\) of step 3, in the logistic form "),
    ],
)
def test_step_4_names_the_logistic_form_as_alpha(lang, fmt, lead):
    text = _symbolic(lang, fmt)
    label = "x1" if lang == "en" else "我"
    logistic = (
        f"\\alpha_{{\\text{{{label}}}}} = \\begin{{bmatrix}}\\frac{{1}}{{1 + e^{{(b - a)/\\sqrt{{2}}}}}} & "
        "\\frac{1}{1 + e^{(a - b)/\\sqrt{2}}}\\end{bmatrix}"
    )
    step4 = text.index(lead)
    assert text.index(logistic, step4) < text.index("\\text{", text.index(logistic, step4) + len(logistic))
    assert text.count(lead) == 1  # the row of equal weights (1/2) is not rewritten, so not named again


def test_a_row_of_exact_weights_is_equal_to_its_fractions():
    # e^0 / (e^0 + e^0): the shown numbers are exact, so α = [1/2, 1/2] exactly, not ≈
    text = _symbolic("en", "markdown", expand="all")
    assert "\\alpha_{\\text{x2}} = \\begin{bmatrix}\\dfrac{1}{2} & \\dfrac{1}{2}\\end{bmatrix} = " in text


def test_a_negative_row_maximum_is_subtracted_in_parentheses():
    spec = load_spec(
        {
            "tokens": ["a", "b"],
            "Q": [[-1, 0], [0, -1]],
            "K": [[1, 0], [1, 0]],
            "V": [[1, 2], [3, 4]],
            "softmax": "stable",
            "focus": "a",
        }
    )
    text = render(derive(spec), "markdown")
    assert "z - \\left(-0.707\\right) = [0,\\ 0]" in text and "z - -" not in text
