"""The worst place of a verdict on saturated rows: where only overlapping error balls are left (two heads alike,
so every error is the same in both), the report names the first place as one of N within the bound."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")


def _twin_heads():
    """Saturated rows (inputs ×10^4, q = k = v) in two heads alike: each error is the same ball in both."""
    q = (np.random.default_rng(0).standard_normal((1, 2, 8, 4)) * 1e4).astype(np.float32)
    q[:, 1] = q[:, 0]
    o = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(q) for _ in range(3))).numpy()
    assert np.array_equal(o[:, 0], o[:, 1])
    return q, o


def _lines(report, lang: str, word: str) -> list[str]:
    return [line for line in report.text(lang).splitlines() if word in line]


def test_torch_allclose_s_worst_place_is_one_of_two_within_the_bound():
    from symattn.kernel import compare

    q, o = _twin_heads()
    report = compare(o, q, q.copy(), q.copy(), rtol=1e-5, atol=1e-8)
    assert (report.verdict.worst, report.verdict.worst_places) == ((4, 1), 2)
    assert _lines(report, "en", "worst entry") == [
        "The worst entry is out[0, 0, 4, 1] (one of 2 places within the bound), "
        "where |out − exact| / (atol + rtol·|exact|) = 1.00×10^-1058449."  # the JSON keeps 1.00e-1058449
    ]
    assert _lines(report, "zh", "最差") == [
        "最差的元素是 out[0, 0, 4, 1]（误差界内的 2 处之一），其 |out − exact| / (atol + rtol·|exact|) = 1.00×10^-1058449。"
    ]
    data = json.loads(report.to_json())
    assert data["verdict"] == {
        "rule": "allclose",
        "rtol": "0.00001",
        "atol": "1e-8",
        "pass": True,
        "worst_at": {"batch": 0, "head": 0, "query": 4, "column": 1},
        "not_finite": False,
        "worst_places": 2,
        "share": "1.00e-1058449",
    }
    # each head alone has one place: no phrase, no key
    assert [h.worst_places for _, h in report.verdict.heads] == [1, 1]
    # the heads' errors are equal exactly: compare's own largest figures are each one of 2 places too (issue 30)
    assert _lines(report, "en", "one of") == [
        "Largest error: 1.49×10^-1058447 ULP, at out[0, 0, 4, 1] (one of 2 places).",
        "Largest relative error: 1.00×10^-1058454, at out[0, 0, 4, 1] (one of 2 places).",
        "Largest error relative to its row's largest magnitude: 3.66×10^-1058455, at out[0, 0, 4, 2] (one of 2 places).",
        *_lines(report, "en", "worst entry"),
    ]
    assert _lines(report, "zh", "2 处之一")[:3] == [
        "最大误差：1.49×10^-1058447 ULP，在 out[0, 0, 4, 1]（2 处之一）。",
        "最大相对误差：1.00×10^-1058454，在 out[0, 0, 4, 1]（2 处之一）。",
        "相对于所在行最大绝对值的最大误差：3.66×10^-1058455，在 out[0, 0, 4, 2]（2 处之一）。",
    ]
    summary = data["summary"]
    assert [summary[f"max_{f}_places"] for f in ("ulps", "relative", "row_relative")] == [2, 2, 2]
    assert all("worst_places" not in head["verdict"] for head in data["heads"])


def test_flash_attention_s_worst_place_is_one_of_two_within_the_bound():
    from symattn.kernel import compare

    q, o = _twin_heads()
    naive = o.copy()
    naive[0, 0, 0, 0] = np.nextafter(naive[0, 0, 0, 0], np.float32(np.inf))
    report = compare(o, q, q.copy(), q.copy(), reference=naive)
    assert (report.verdict.worst, report.verdict.worst_places, report.verdict.passed) == ((4, 2), 2, True)
    assert _lines(report, "en", "largest absolute") == [
        "The largest absolute error |out − exact| is at out[0, 0, 4, 2] (one of 2 places within the bound)."
    ]
    assert _lines(report, "zh", "绝对误差") == [
        "绝对误差 |out − exact| 最大处在 out[0, 0, 4, 2]（误差界内的 2 处之一）。"
    ]
    verdict = json.loads(report.to_json())["verdict"]
    assert (verdict["worst_at"], verdict["worst_places"]) == ({"batch": 0, "head": 0, "query": 4, "column": 2}, 2)
