"""Expanded lines that do not add up: the derivation marks the first one, the document says why once, there."""

from decimal import Decimal
from fractions import Fraction

import pytest

from symattn.derivation.addition import dot_adds_up, first_inexact, rounds_to
from symattn.derivation.derive import derive
from symattn.exact.rounding import Num
from symattn.input import builtin
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render

NOTE = {
    "en": "A line recomputed from the numbers shown may end in a different last digit: each result is the exact "
    "value rounded, not computed from the rounded numbers before it. For numbers that add up, use hand rounding ",
    "zh": "用这里显示的数重算一行，最后一位可能不同：每个结果都是精确值四舍五入得到的，而不是由前面已舍入的数算出来的。"
    "想让每一步都对得上，请用手算方式",
}
OPTION = {"markdown": "`--rounding hand`", "latex": "\\texttt{-{}-{}rounding hand}"}
PARENS = {"en": "({})", "zh": "（{}）"}


@pytest.mark.parametrize(
    "value, shown, exact, adds_up",
    [
        (Fraction("1.152"), "1.150", False, False),  # the issue's line: 0.241×10 + (−0.097)×10 + (−0.144)×2
        (Fraction("1.1504"), "1.150", False, True),
        (Fraction("1.1505"), "1.151", False, True),  # half-up
        (Fraction("1.1505"), "1.150", False, False),
        (Fraction("-1.1505"), "-1.151", False, True),  # half away from zero
        (Fraction(1, 3), "0.333", False, True),
        (Fraction("0.92"), "0.92", True, True),
        (Fraction("0.9201"), "0.92", True, False),  # = claims the whole value
        (Fraction(5), "5", True, True),
        (Fraction("5123.4") * 10**27, "5.12E+30", False, True),  # m × 10^k rounds at its own last digit
        (Fraction("5126") * 10**27, "5.12E+30", False, False),
    ],
)
def test_rounds_to(value, shown, exact, adds_up):
    assert rounds_to(value, Num(Decimal(shown), exact, "E" in shown)) is adds_up


def _derive(name, lang="en", **options):
    return derive(load_spec(builtin.example_path(name, lang)).with_options(**options))


@pytest.mark.parametrize(
    "name, expand, where",
    [
        ("seed", "focus", "softmax[0]"),  # e^{0.134} is 1.143, but e^{0.13435…} ≈ 1.144 is shown
        ("seed", "all", "softmax[0]"),
        ("causal", "all", "softmax[2]"),  # rows 1 and 2 see one and two keys: their lines add up
        ("multihead", "focus", "head/softmax[0]"),
        ("symbolic", "focus", "substitution/softmax[0]"),
    ],
)
def test_the_first_line_that_does_not_add_up(name, expand, where):
    assert first_inexact(_derive(name, expand=expand)) == where


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("expand", ["focus", "all"])
@pytest.mark.parametrize("name", builtin.names())
def test_by_hand_every_line_adds_up(name, expand, lang):
    # each number comes from the numbers shown before it: nothing to explain, and no note
    # (issue 20's variants refuse the backward pass: their forward pass only)
    backward = name not in ("alibi", "sinks", "softcap")
    derivation = _derive(name, lang, rounding="hand", expand=expand, backward=backward)
    assert first_inexact(derivation) is None
    assert NOTE[lang] not in render(derivation, "markdown")


def test_the_issue_s_line_is_found_in_the_backward_softmax():
    def rows(**options):
        return [
            r
            for s in _derive("backward", expand="all", **options).steps
            if s.kind == "backward_softmax"
            for r in s.rows
        ]

    line = rows()[2].products[0]  # dZ(it, cat) ≈ 0.241×10 + (−0.097)×10 + (−0.144)×2: the terms give 1.152
    assert (line.result.value, dot_adds_up(line)) == (Decimal("1.150"), False)
    assert all(dot_adds_up(d) for r in rows(rounding="hand") for d in r.products)


@pytest.mark.parametrize("fmt", ["markdown", "latex"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_document_says_why_once_where_it_first_happens(lang, fmt):
    text = render(_derive("seed", lang), fmt)
    assert text.count(NOTE[lang]) == 1 and NOTE[lang] + PARENS[lang].format(OPTION[fmt]) in text
    # after the focus row's weights, before their table of percents
    note = text.index(NOTE[lang])
    assert text.rindex("\\dfrac{1.917}{4.760}", 0, note) < note < text.index("40.3", note)


def test_a_document_whose_lines_all_add_up_has_no_note():
    spec = {"tokens": ["a", "b"], "Q": [[0, 0], [0, 0]], "K": [[1, 0], [0, 1]], "V": [[1, 2], [3, 4]]}
    derivation = derive(load_spec(spec).with_options(expand="all"))  # every z = 0: weights 1/2, exactly
    assert first_inexact(derivation) is None
    assert NOTE["en"] not in render(derivation, "markdown")
