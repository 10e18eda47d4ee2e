"""Attention sinks on the float64 path of symattn.kernel.compare (issue 30, item 2): the output, the LSE (the
sink in it, as FlashAttention's kernels write it), dQ, dK, dV and kind="dsink", each against torch's float64
autograd of gpt-oss's reference (the sink a column of the softmax, dropped after it), GQA and causal."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from symattn.input.errors import ShapeError, SpecError

torch = pytest.importorskip("torch")
CLOSE = {"rule": "allclose", "rtol": 1.2e-7, "atol": 1e-13}
MASKS = {"causal": True, "causal_align": "bottom-right"}


def reference(q, k, v, sinks):
    """gpt-oss's attention in the inputs' dtype: the sink logit one more column of the scores, its weight
    dropped after the softmax; the LSE over every column, the sink's included. Causal, bottom-right."""
    group = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(group, 1) for t in (k, v))
    n, m = q.shape[2], k.shape[2]
    z = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    z = z.masked_fill(~torch.ones(n, m, dtype=torch.bool).tril(m - n), -math.inf)
    full = torch.cat([z, sinks[None, :, None, None].expand(q.shape[0], -1, n, 1)], -1)
    return torch.softmax(full, -1)[..., :-1] @ v, torch.logsumexp(full, -1)


@pytest.fixture(scope="module")
def case():
    """(2, 4, 64, 16) queries, 2 key/value heads, a sink per query head, dO; torch's float64 O, LSE and
    gradients of every input, the sinks' included."""
    gen = torch.Generator().manual_seed(64)
    q = 2 * torch.randn(2, 4, 64, 16, generator=gen)
    k, v = (2 * torch.randn(2, 2, 64, 16, generator=gen) for _ in range(2))
    sinks, dout = torch.randn(4, generator=gen), torch.randn(2, 4, 64, 16, generator=gen)
    leaves = [t.double().requires_grad_() for t in (q, k, v, sinks)]
    out, lse = reference(*leaves)
    out.backward(dout.double())
    grads = dict(zip(("dq", "dk", "dv", "dsink"), (t.grad for t in leaves)))
    return (q, k, v, sinks, dout), out.detach(), lse.detach(), grads


def test_output_and_lse_against_torch_float64(case):
    from symattn.kernel import compare

    (q, k, v, sinks, _), out, lse, _ = case
    assert compare(out.float(), q, k, v, sinks=sinks, **MASKS, **CLOSE).ok
    assert compare(lse.float(), q, k, v, kind="lse", sinks=sinks, **MASKS, **CLOSE).ok
    assert not compare(out.float(), q, k, v, **MASKS, **CLOSE).ok  # the same without the sinks
    plain = reference(q.double(), k.double(), v.double(), torch.full((4,), -1e4, dtype=torch.float64))[1]
    assert not compare(plain.float(), q, k, v, kind="lse", sinks=sinks, **MASKS, **CLOSE).ok  # LSE without the sink


@pytest.mark.parametrize("kind", ["dq", "dk", "dv", "dsink"])
def test_gradients_against_torch_float64_autograd(case, kind):
    from symattn.kernel import compare

    (q, k, v, sinks, dout), _, _, grads = case
    report = compare(grads[kind].float(), q, k, v, kind=kind, dout=dout, sinks=sinks, **MASKS, **CLOSE)
    assert report.ok
    if kind != "dsink":  # without the sinks the same gradients fail
        assert not compare(grads[kind].float(), q, k, v, kind=kind, dout=dout, **MASKS, **CLOSE).ok


def test_dsink_is_minus_the_sum_of_the_sink_share_times_d(case):
    """dsink_h = −Σ_{b,i} p_sink[b,h,i]·D[b,h,i], D_i = Σ_j dO_ij·O_ij: the sign of torch's autograd; the
    opposite sign fails, and the report names out[head]."""
    from symattn.kernel import compare

    (q, k, v, sinks, dout), out, lse, grads = case
    share = torch.exp(sinks.double()[None, :, None] - lse)  # the sink's weight of each row
    formula = -(share * (dout.double() * out).sum(-1)).sum((0, 2))
    assert torch.allclose(formula, grads["dsink"], rtol=1e-12, atol=0)
    report = compare(-grads["dsink"].float(), q, k, v, kind="dsink", dout=dout, sinks=sinks, **MASKS, **CLOSE)
    assert not report.ok
    assert report.comparison.where.convention == "out[head]"
    assert json.loads(report.to_json())["places"] == "0-based, as numpy indexes: out[head]"


def test_the_summary_row_of_dsink_has_its_shape_and_place(case):
    """The pytest plugin's row (kernel/record.py): dsink's shape is (H,) as given, its worst place out[head]."""
    from symattn.kernel import compare, record

    (q, k, v, sinks, dout), _, _, grads = case
    bad = grads["dsink"].float().clone()
    bad[3] += 0.5
    record.start()
    try:
        compare(bad, q, k, v, kind="dsink", dout=dout, sinks=sinks, **MASKS, **CLOSE)
    finally:
        rows = record.stop()
    assert [(r["kind"], r["shape"], r["dtype"], r["at"], r["result"]) for r in rows] == [
        ("dsink", "(4)", "float32", "out[3]", "FAIL")
    ]


def test_dsink_of_float64_results_is_refined_with_arb(case):
    """A float64 dsink is beyond the float64 bound: arb decides every head, and torch's float64 is within
    a few of its ULPs."""
    from symattn.kernel import compare

    (q, k, v, sinks, dout), _, _, grads = case
    report = compare(grads["dsink"], q, k, v, kind="dsink", dout=dout, sinks=sinks, **MASKS, max_ulp=8)
    assert report.ok
    assert report.comparison.refined == 4


def test_the_sink_term_bound_exactly():
    """One query, one key of score 0 and a sink of logit 0: ℓ = e^0 + e^0 = 2 exactly, so O = v/2 and
    LSE = ln 2. The sink's term is exactly 1 with the exp's bound alone (s − M = 0 is exact), and ℓ's bound
    is the key's (γ_3 of the sum, its exp's) plus the sink's and one rounding of the sum, u·2."""
    from symattn.kernel import float64, logsumexp, score_mods

    head = float64.head(
        np.zeros((1, 4)), np.zeros((1, 4)), np.array([[3.0]]), None, None, None, (score_mods.Denominator((0.0,), 1),)
    )
    assert head is not None
    block = next(float64.blocks(head))
    assert (block.total[0, 0], block.shift[0, 0], block.output[0, 0]) == (2.0, 0.0, 1.5)
    term = float64.extra_term(head, slice(0, 1), np.zeros((1, 1)))
    assert term is not None and term[0][0, 0] == 1.0
    S = float64.SAFETY
    assert term[1][0, 0] == S * (1 + 2 * float64.RHO) * float64.RHO
    _, eE, _, _, _ = float64.exps(head, slice(0, 1), float64.Split.of(head.K))
    key = S * (float64.gamma(3) * 1.0 + eE[0, 0])
    assert block.total_error[0, 0] == S * (key + term[1][0, 0] + float64.U * 2.0)
    value, error = logsumexp.lse(block)
    assert abs(Fraction(float(value[0])) - Fraction(math.log(2))) <= Fraction(float(error[0]))
    assert 0 < error[0] < 16 * float64.U


def test_a_planted_error_under_sinks_is_named_there(case):
    from symattn.testing import assert_attention_close

    (q, k, v, sinks, _), out, _, _ = case
    bad = out.float().clone()
    bad[1, 2, 41, 5] += 0.25
    with pytest.raises(AssertionError) as info:
        assert_attention_close(bad, q, k, v, sinks=sinks, **MASKS, rtol=1e-5, atol=1e-7)
    assert "out[1, 2, 41, 5]" in str(info.value)


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"sinks": [0.0, 1.0]}, ShapeError, "sinks: shape: (2,); expected (4,), a finite logit per query head"),
        (
            {"sinks": [0.0, 1.0, math.inf, 2.0]},
            SpecError,
            "sinks[2]: inf is not a finite logit at most 2^40 (1099511627776)",
        ),
        (
            {"sinks": [0.0, 1.0, 2.0, 1e38]},
            SpecError,
            "sinks[3]: 1e+38 is not a finite logit at most 2^40 (1099511627776)",
        ),
        ({"kind": "dsink"}, SpecError, "kind: dsink is the gradient of the logits sinks gives: give sinks"),
    ],
)
def test_what_sinks_refuse_is_one_line(case, options, error, message):
    from symattn.kernel import compare

    (q, k, v, _, dout), out, _, _ = case
    given = {"dout": dout} if options.get("kind") == "dsink" else {}
    with pytest.raises(error) as info:
        compare(out[:, :, 0, 0].float() if given else out.float(), q, k, v, **options, **given)
    assert str(info.value) == message


def test_a_sweep_with_sinks_checks_every_kind(tmp_path):
    """The sweep's grid key ``sinks`` reaches the float64 path: a float64 kernel with sinks rounded to the
    case's dtype passes FlashAttention's rule in every kind (the naive reference has the sink column too)."""
    pytest.importorskip("distributed")
    from symattn.sweep.case import run_case
    from symattn.sweep.grid import load_grid
    from symattn.sweep.pipeline import settings

    grid = '[grid]\nheads = [2]\nkv_heads = [1]\nseqlen = [16]\nhead_dim = [8]\ndtype = ["float32", "bfloat16"]\n'
    text = 'seed = 5\nrule = "flash"\nkinds = ["output", "lse", "dq", "dk", "dv"]\n' + grid
    (tmp_path / "grid.toml").write_text(text + "causal = [true]\nsinks = [true]\n")
    loaded = load_grid(str(tmp_path / "grid.toml"))
    rows = [
        run_case(settings(loaded), i, c.point, "tests.sweep_kernels:sinks_float64", "")
        for i, c in enumerate(loaded.cases)
    ]
    assert [(r["dtype"], r["sinks"], r["verdict"]) for r in rows] == [
        ("float32", True, "pass"),
        ("bfloat16", True, "pass"),
    ]
    assert [[c["kind"] for c in r["checks"] if c["verdict"] == "pass"] for r in rows] == [
        ["output", "lse", "dq", "dk", "dv"]
    ] * 2


def test_a_sweeps_refusal_of_an_lse_names_the_lse_not_compares_out(tmp_path):
    """The kernel's (out, lse) with an LSE one query short: the LSE check's line names the LSE (compare's own
    line calls its first argument out, which in a sweep's table read as the output); the output passes."""
    pytest.importorskip("distributed")
    from symattn.sweep.case import run_case
    from symattn.sweep.grid import load_grid
    from symattn.sweep.pipeline import settings

    grid = '[grid]\nheads = [2]\nkv_heads = [1]\nseqlen = [16]\nhead_dim = [8]\ndtype = ["float32"]\ncausal = [true]\n'
    (tmp_path / "grid.toml").write_text('seed = 5\nrule = "ulp"\nmax_ulp = 1e6\nkinds = ["output", "lse"]\n' + grid)
    loaded = load_grid(str(tmp_path / "grid.toml"))
    (row,) = [
        run_case(settings(loaded), i, c.point, "tests.sweep_kernels:short_lse", "") for i, c in enumerate(loaded.cases)
    ]
    assert [(c["kind"], c["verdict"], c["message"]) for c in row["checks"]] == [
        ("output", "pass", None),
        ("lse", "fail", "lse: shape: (1, 2, 15); the lse of these q, k and v is (1, 2, 16)"),
    ]
