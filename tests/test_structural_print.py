"""compute's closed forms, written from the model's structure, against SymPy's str() of the same forms.

sympify appears here only, in the test, to read the structural text back.
"""

import re

import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symattn.derivation.intermediates import compute
from symattn.exact.heads import build_model
from symattn.input.spec import load_spec

from .strategies import matrix

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def head_specs(draw):
    """Small heads with repeated scores (collected terms, flat rows), zero scores (e^0 = 1), masks,
    cross-attention and every kind of scale (√d_k rational or not, none, a rational)."""
    n_q, n_k = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    d, dv = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    small = st.sampled_from(["0", "1", "-1", "0.5", "2", "0.25", "-0.3", "1.1"])

    def grid(rows, cols):
        return draw(
            st.one_of(
                st.just(matrix(draw, rows, cols)),
                st.lists(st.lists(small, min_size=cols, max_size=cols), min_size=rows, max_size=rows),
            )
        )

    raw = {
        "Q": grid(n_q, d),
        "K": grid(n_k, d),
        "V": grid(n_k, dv),
        "scale": draw(st.sampled_from(["sqrt", "sqrt", "none", "1/3", "2"])),
    }
    if draw(st.booleans()):
        rows = draw(st.lists(st.lists(st.integers(0, 1), min_size=n_k, max_size=n_k), min_size=n_q, max_size=n_q))
        raw["mask"] = [row if any(row) else [1] + row[1:] for row in rows]
    return raw


def inline(text: str, sums: list[str]) -> str:
    """The text with each row-sum name s_i replaced by its sum, in parentheses."""
    return re.sub(r"\bs_(\d+)\b", lambda m: f"({sums[int(m.group(1)) - 1]})", text)


@SETTINGS
@given(head_specs())
def test_structural_text_is_sympy_str(raw):
    spec = load_spec(raw)
    data = compute(spec, digits=5)
    model = build_model(spec)
    for quantity in ("scores", "scaled", "exp"):
        forms = model.exact(quantity)
        assert data[quantity]["exact"] == [[str(x) for x in forms.row(i)] for i in range(forms.rows)], quantity
    sums = data["exp_sum"]["exact"]
    assert sums == [str(x) for x in model.exp_sum]
    assert data["exp_sum"]["name"] == [f"s_{i + 1}" for i in range(model.n_queries)]
    weights = model.exact("weights")
    assert [[inline(x, sums) for x in row] for row in data["weights"]["exact"]] == [
        [str(x) for x in weights.row(i)] for i in range(weights.rows)
    ]
    output = model.exact("output")
    for i, row in enumerate(data["output"]["exact"]):
        name = sympy.Symbol(f"s_{i + 1}")
        for k, text in enumerate(row):
            # the same value, exactly: times the row sum, both expand to the same canonical sum of c·e^z
            times_sum = (sympy.sympify(text, locals={f"s_{i + 1}": name}) * name).subs(name, model.exp_sum[i])
            assert sympy.expand(times_sum) == sympy.expand(output[i, k] * model.exp_sum[i]), (text, output[i, k])
            if text.startswith("("):  # a sum over the row sum: the sum is str() of Σ_j V_jk e^{z_ij}
                top = sympy.Add(*[model.V[j, k] * model.exp[i, j] for j in range(model.n_keys)])
                assert text == f"({top})/s_{i + 1}"


def test_seed_text():
    data = compute(
        load_spec(
            {
                "Q": [["1.0", "0.0"], ["0.0", "1.0"], ["0.9", "0.1"]],
                "K": [["1.0", "0.2"], ["0.1", "1.0"], ["0.8", "0.3"]],
                "V": [["10", "0"], ["0", "10"], ["1", "1"]],
            }
        ),
        digits=6,
    )
    assert data["exp_sum"]["exact"][2] == "exp(19*sqrt(2)/200) + exp(3*sqrt(2)/8) + exp(23*sqrt(2)/50)"
    assert data["exp_sum"]["name"] == ["s_1", "s_2", "s_3"]
    assert data["weights"]["exact"][2] == ["exp(23*sqrt(2)/50)/s_3", "exp(19*sqrt(2)/200)/s_3", "exp(3*sqrt(2)/8)/s_3"]
    assert data["output"]["exact"][2] == [
        "(exp(3*sqrt(2)/8) + 10*exp(23*sqrt(2)/50))/s_3",
        "(exp(3*sqrt(2)/8) + 10*exp(19*sqrt(2)/200))/s_3",
    ]


def test_collected_terms_ones_and_single_terms():
    # row 1: scores 0, 0, 1 (scale none): 2 + E; V column 2 is zero except on the last key
    data = compute(
        load_spec(
            {
                "Q": [["1"], ["0"]],
                "K": [["0"], ["0"], ["1"]],
                "V": [["1", "0"], ["1", "0"], ["-3/2", "-3/10"]],
                "scale": "none",
            }
        ),
        digits=5,
    )
    assert data["exp"]["exact"] == [["1", "1", "E"], ["1", "1", "1"]]
    assert data["exp_sum"]["exact"] == ["2 + E", "3"]
    assert data["weights"]["exact"] == [["1/s_1", "1/s_1", "E/s_1"], ["1/3", "1/3", "1/3"]]
    # with a rational term (e^0 = 1) or E the sum is str() itself: "2 - 3*E/2"
    assert data["output"]["exact"] == [["(2 - 3*E/2)/s_1", "-3*E/(10*s_1)"], ["1/6", "-1/10"]]
