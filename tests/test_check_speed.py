"""The check's closed forms are printed without SymPy's expressions (issue 19 §5): the same text."""

import pytest
import sympy
from hypothesis import HealthCheck, given, settings

from symattn.checking.checker import check
from symattn.checking.closed import Closed, Texts
from symattn.checking.report import report_data
from symattn.exact.heads import build_model
from symattn.input.spec import load_spec

from .strategies import specs
from .test_layout import rows

QUANTITIES = ("scores", "scaled", "exp", "exp_sum", "weights", "output")


def texts_agree(raw):
    model = build_model(load_spec(raw))
    texts = Texts()
    for q in QUANTITIES:
        forms = model.exact(q)
        for i in range(forms.rows):
            for j in range(forms.cols):
                assert texts.text(model, q, i, j) == str(forms[i, j]), (q, i, j)


SPECS = {
    "zeros and repeats": {"Q": rows(6, 3, 3), "K": rows(6, 3, 5), "V": rows(6, 3, 2)},
    "causal": {"Q": rows(5, 2, 3), "K": rows(5, 2, 5), "V": rows(5, 4, 2), "mask": "causal"},
    "cross": {"Q": rows(3, 2, 3), "K": rows(5, 2, 5), "V": rows(5, 2, 2)},
    "two decimals": {"Q": rows(4, 4, 3, 2), "K": rows(4, 4, 5, 2), "V": rows(4, 2, 2, 2)},
    "rational scale": {"Q": rows(4, 4, 3), "K": rows(4, 4, 7), "V": rows(4, 3, 2), "scale": "0.5"},
}


@pytest.mark.parametrize("name", SPECS)
def test_structural_text_is_sympys_str(name):
    texts_agree(SPECS[name])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs(max_tokens=4))
def test_structural_text_is_sympys_str_for_any_spec(raw):
    texts_agree(raw)


def test_report_exact_is_str_of_the_expression():
    raw = SPECS["zeros and repeats"]
    model = build_model(load_spec(raw))
    claims = {q: [[format(x, "f") for x in row] for row in model.rounded(q, 3)] for q in ("weights", "output")}
    report = check(load_spec(raw), {"claims": claims})
    data = report_data(report)["claims"]
    for v, entry in zip(report.results, data, strict=True):
        assert isinstance(v.closed_form, Closed)
        assert entry["exact"] == str(v.closed_form.expr)
    assert {e["verdict"] for e in data} <= {"exact", "rounded"}


def test_closed_form_compares_as_its_expression():
    raw = SPECS["causal"]
    model = build_model(load_spec(raw))
    closed = Closed(Texts(), model, "scaled", (0, 1))
    assert closed == sympy.S.NegativeInfinity and str(closed) == "-oo"
