"""Exact decimals in a derivation (issue 32, the author's trial: "2.5" in Q, "2.500" in Q′): never padded to a
rounding's decimals. A matrix of exact values only shares one width; beside rounded values (≈), each exact value
keeps its own shortest form, so it reads as in the matrix it came from (docs/spec.md, "Exact decimals")."""

from symattn.derivation.derive import derive
from symattn.input import builtin
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render

TURNED = {
    "tokens": ["a", "b"],
    "Q": [["2.5", 1], [1, 0]],
    "K": [["2.5", 1], [1, 0]],
    "V": [[1, 0], [0, 1]],
    "rope": True,
}


def test_an_exact_value_in_q_reads_the_same_in_the_turned_q():
    text = render(derive(load_spec(TURNED)), "markdown")
    # position 0 is not turned: its 2.5 and 1 stay as in Q, beside the turned row's rounded 0.540 and 0.841
    assert "Q'\\approx\\begin{bmatrix}2.5 & 1 \\\\ 0.540 & 0.841\\end{bmatrix}" in text
    assert "K'^\\top=\\begin{bmatrix}2.5 & 0.540 \\\\ 1 & 0.841\\end{bmatrix}" in text
    assert "Q'K'^\\top&:\\ [2.192,\\ 1]" in text
    assert "2.500" not in text


def test_neighbouring_matrices_of_mla_with_rope_show_an_exact_value_alike():
    text = render(derive(load_spec(builtin.example_path("mla-rope", "en"))), "markdown")
    # K (exact only: one width) and its turned K′ (with rounded entries: each exact one in its shortest form)
    assert "K=\\begin{bmatrix}2.0 & 0.5 & 0.0 & 1.0 \\\\ 2.0 & 1.5 & 1.0 & 0.0 \\\\" in text
    assert "K'\\approx\\begin{bmatrix}2 & 0.5 & 0 & 1 \\\\ 2 & 1.5 & 0.540 & 0.841 \\\\ 2 & 1 & -1.325 & 0.493" in text
    assert "\\frac{S}{\\sqrt{4}}\\approx\\begin{bmatrix}1 & 1.270 & 0.337 \\\\ 0.520 & 0.75 & 1.191 \\\\" in text


def test_a_matrix_of_exact_values_only_shares_one_width():
    text = render(derive(load_spec(builtin.example_path("flash", "en"))), "markdown")
    assert "S \\times 1=\\begin{bmatrix}1.0 & 0.0 & 2.0 & 1.0 \\\\" in text
    assert "0.5 & -2.0 & 1.0 & -0.5\\end{bmatrix}" in text
