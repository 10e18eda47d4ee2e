"""An independent reader of the rendered Markdown: every shown equation is recomputed here, from the spec
file's own text, with Python's ``fractions`` and ``decimal`` (60 digits), never with symattn's code.

Golden files only compare symattn with its own earlier output; this test is an oracle from outside. It
catches, for example, terms paired with the wrong entries (``0.9×0.2 + 0.1×1.0 = 0.92``), a wrong sum, a
rounding that is not half-up, or a weight matrix whose rows were taken from another step.
"""

import re
import tomllib
from decimal import ROUND_HALF_UP, Decimal, getcontext
from fractions import Fraction
from pathlib import Path

import pytest

from symattn.cli.commands import main

EXAMPLES = Path(__file__).resolve().parent.parent / "symattn" / "examples"
getcontext().prec = 60

_DOT = re.compile(
    r"Q_\{\\text\{(?P<q>[^}]*)\}\}\\cdot K_\{\\text\{(?P<k>[^}]*)\}\} &= (?P<terms>.+?) = (?P<result>-?[0-9.]+)"
)
_TERM = re.compile(r"^(?:\\left\()?(-?[0-9.]+)(?:\\right\))?\\times (?:\\left\()?(-?[0-9.]+)(?:\\right\))?$")


def _matrix_after(markdown: str, lead: str) -> list[list[Decimal]]:
    """The bmatrix shown right after ``lead`` (``A\\approx``), as Decimals exactly as printed."""
    start = markdown.index(lead + "\\begin{bmatrix}") + len(lead) + len("\\begin{bmatrix}")
    body = markdown[start : markdown.index("\\end{bmatrix}", start)]
    return [[Decimal(x.strip()) for x in row.split("&")] for row in body.split("\\\\")]


def _decimals(x: Decimal) -> int:
    return -x.as_tuple().exponent


def _rounded(value: Decimal, like: Decimal) -> Decimal:
    return value.quantize(Decimal(1).scaleb(-_decimals(like)), rounding=ROUND_HALF_UP)


def _spec(name: str, lang: str) -> dict:
    text = (EXAMPLES / f"{name}.{lang}.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text, parse_float=Decimal)
    return {key: [[Fraction(str(x)) for x in row] for row in data[key]] for key in ("Q", "K", "V")} | {
        "tokens": data["tokens"]
    }


def _render(capsys, *argv: str) -> str:
    assert main(["render", *argv]) == 0
    return capsys.readouterr().out


def _exact_chain(spec: dict) -> dict[str, list[list[Decimal]]]:
    """S, S/√d_k, e^z, the weights and the output, at 60 digits, straight from the definition."""
    Q, K, V = spec["Q"], spec["K"], spec["V"]
    root = Decimal(len(Q[0])).sqrt()
    S = [[sum((a * b for a, b in zip(q, k)), Fraction(0)) for k in K] for q in Q]
    z = [[Decimal(s.numerator) / Decimal(s.denominator) / root for s in row] for row in S]
    e = [[x.exp() for x in row] for row in z]
    A = [[x / sum(row) for x in row] for row in e]
    Vd = [[Decimal(v.numerator) / Decimal(v.denominator) for v in row] for row in V]
    out = [[sum(a * v[c] for a, v in zip(row, Vd)) for c in range(len(Vd[0]))] for row in A]
    return {"S": S, "z": z, "e": e, "A": A, "out": out}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_dot_product_pairs_the_right_entries_and_adds_up(capsys, lang):
    spec = _spec("seed", lang)
    index = {label: i for i, label in enumerate(spec["tokens"])}
    markdown = _render(capsys, "--lang", lang, "--expand", "all")
    lines = [m for m in _DOT.finditer(markdown)]
    assert len(lines) == len(spec["Q"]) * len(spec["K"])
    for m in lines:
        q, k = spec["Q"][index[m["q"]]], spec["K"][index[m["k"]]]
        terms = [_TERM.match(t.strip()) for t in m["terms"].split(" + ")]
        assert all(terms), m.group(0)
        pairs = [(Fraction(t[1]), Fraction(t[2])) for t in terms]
        assert pairs == list(zip(q, k)), f"terms paired with the wrong entries: {m.group(0)}"
        assert Fraction(m["result"]) == sum(a * b for a, b in pairs), m.group(0)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_exact_mode_shows_each_exact_value_rounded_half_up(capsys, lang):
    spec = _spec("seed", lang)
    markdown = _render(capsys, "--lang", lang)
    chain = _exact_chain(spec)
    for lead, exact in (
        ("\\frac{S}{\\sqrt{2}}\\approx", chain["z"]),
        ("A\\approx", chain["A"]),
        ("AV\\approx", chain["out"]),
    ):
        shown = _matrix_after(markdown, lead)
        assert shown == [[_rounded(x, s) for x, s in zip(row, srow)] for row, srow in zip(exact, shown)], lead
    # the focus row's exps, e^{z} ≈ …, of the exact z
    focus = len(spec["Q"]) - 1
    exps = [Decimal(x) for x in re.findall(r"e\^\{-?[0-9.]+\} &\\approx (-?[0-9.]+)", markdown)]
    assert exps == [_rounded(x, s) for x, s in zip(chain["e"][focus], exps)]
    assert len(exps) == len(spec["K"])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_hand_mode_recomputes_each_step_from_the_shown_numbers(capsys, lang):
    markdown = _render(capsys, "--lang", lang, "--rounding", "hand")
    weights = _matrix_after(markdown, "A\\approx")
    # each shown weight is the shown exp over the shown sum, rounded half-up
    fractions = re.findall(r"\\dfrac\{(-?[0-9.]+)\}\{(-?[0-9.]+)\}", markdown)
    focus_row = weights[-1]
    assert [_rounded(Decimal(a) / Decimal(b), w) for (a, b), w in zip(fractions, focus_row)] == focus_row
    # and the output is exactly the shown weights times V (so it is written with =), as a calculator gives it
    spec = _spec("seed", lang)
    V = [[Decimal(v.numerator) / Decimal(v.denominator) for v in row] for row in spec["V"]]
    output = _matrix_after(markdown, "AV=")
    assert output == [[sum(a * v[c] for a, v in zip(row, V)) for c in range(len(V[0]))] for row in weights]
