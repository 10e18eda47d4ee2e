"""Saturated softmax rows (issue 30): one weight 1, the rest e^(−10^4) or far less, and sinks that take all the
weight. compare decides each error from a ball of the error itself (kernel/deviation.py); every figure is
checked here against mpmath at 50 digits, which computes that error the same way, independently."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symattn.input.errors import SpecError

mpmath.mp.dps = 50


def _inputs(scale: float, seed: int = 0, shape=(1, 2, 8, 4)):
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal(shape) * scale).astype(np.float32)
    return q, q.copy(), q.copy()


def _three(x) -> Decimal:
    """x (an mpf > 0) to three significant digits, half-up (from 40 digits: no double rounding near here)."""
    exponent = int(mpmath.floor(mpmath.log10(x)))
    mantissa = x / mpmath.mpf(10) ** exponent
    if mantissa >= 10:
        mantissa, exponent = mantissa / 10, exponent + 1
    q = Decimal(mpmath.nstr(mantissa, 40)).quantize(Decimal("0.01"), ROUND_HALF_UP)  # in [1, 10]: no context limit
    if q == 10:
        q, exponent = Decimal("1.00"), exponent + 1
    return Decimal(f"{int(q * 100)}E{exponent - 2}")


def _exact(q, k, v, b, h, i, c, x, sink=None):
    """(error exact − x, exact value) of out[b, h, i, c] in mpmath: the error summed as Σ e^z (v − x) / Σ e^z."""
    z = [
        mpmath.fsum(mpmath.mpf(float(a)) * mpmath.mpf(float(t)) for a, t in zip(q[b, h, i], k[b, h, j])) / 2
        for j in range(k.shape[2])
    ]
    top = max(z + ([mpmath.mpf(sink)] if sink is not None else []))
    w = [mpmath.exp(s - top) for s in z]
    total = mpmath.fsum(w) + (mpmath.exp(mpmath.mpf(sink) - top) if sink is not None else 0)
    xm = mpmath.mpf(x)
    d = (
        mpmath.fsum(a * (mpmath.mpf(float(v[b, h, j, c])) - xm) for j, a in enumerate(w))
        - (total - mpmath.fsum(w)) * xm
    ) / total
    e = mpmath.fsum(a * mpmath.mpf(float(v[b, h, j, c])) for j, a in enumerate(w)) / total
    return d, e


def _ulp32(e) -> mpmath.mpf:
    return mpmath.mpf(2) ** (max(int(mpmath.floor(mpmath.log(abs(e), 2))), -126) - 23)


@pytest.mark.parametrize("scale", [1e2, 1e4, 1e6])
def test_a_saturated_row_is_decided_against_mpmath(scale):
    torch = pytest.importorskip("torch")
    from symattn.kernel import compare

    q, k, v = _inputs(scale)
    o = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(t) for t in (q, k, v))).numpy()
    report = compare(o, q, k, v, rtol=1e-5, atol=1e-8)
    assert report.ok and report.comparison.histogram == ((1, 64),)
    entries = report.comparison.entries
    for b, h, i, c in np.ndindex(o.shape):
        e = entries.entry(i, h * 4 + c)  # the heads lie side by side: row i, head h's columns
        d, exact = _exact(q, k, v, b, h, i, c, float(o[b, h, i, c]))
        assert e.ulps == _three(abs(d) / _ulp32(exact)), (b, h, i, c)
        assert e.relative == _three(abs(d / exact)), (b, h, i, c)


def test_a_tie_at_seventeen_digits_shows_the_side_of_the_error():
    """x = −232.503082275390625 is a tie at 17 digits; the exact value lies within e^(−10^4) of it, toward 0."""
    torch = pytest.importorskip("torch")
    from symattn.kernel import compare

    q, k, v = _inputs(1e2)
    o = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(t) for t in (q, k, v))).numpy()
    entry = compare(o, q, k, v).comparison.entries.entry(2, 0)  # out[0, 0, 2, 0]
    assert float(o[0, 0, 2, 0]) == -232.503082275390625
    d, _ = _exact(q, k, v, 0, 0, 2, 0, float(o[0, 0, 2, 0]))
    assert d > 0 and str(entry.exact) == "-232.50308227539062" and str(entry.ulps) == "1.40E-368"


@pytest.mark.parametrize("sink", [1e8, float(np.float32(-1e38))])
def test_a_huge_sink_is_decided_against_mpmath(sink):
    from symattn.kernel import compare

    q, k, v = _inputs(1)
    report = compare(q, q, k, v, sinks=np.array([sink, 0.0]))
    for b, h, i, c in np.ndindex(q.shape):
        if h == 1:
            continue
        e = report.comparison.entries.entry(i, h * 4 + c)
        x = float(q[b, h, i, c])
        d, exact = _exact(q, k, v, b, h, i, c, x, sink)
        shown = len(e.exact.as_tuple().digits)  # 17, or the digits (up to 13) the float64 bound decides
        assert e.exact == Decimal(mpmath.nstr(exact, shown, min_fixed=1, max_fixed=0)), (i, c)
        assert e.ulps == _three(abs(d) / _ulp32(exact)), (i, c)
        assert e.relative == _three(abs(d / exact)), (i, c)


@pytest.mark.parametrize("sink, text", [(float(np.float32(1e38)), "9.999999680285692e+37"), (float("nan"), "nan")])
def test_a_sink_past_two_to_the_forty_is_refused_in_one_line(sink, text):
    from symattn.kernel import compare

    q, k, v = _inputs(1)
    with pytest.raises(SpecError) as info:
        compare(q, q, k, v, sinks=np.array([0.0, sink]))
    assert str(info.value) == f"sinks[1]: {text} is not a finite logit at most 2^40 (1099511627776)"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    exponent=st.integers(0, 6),
    seed=st.integers(0, 2**16),
    n=st.integers(1, 4),
    m=st.integers(1, 5),
    d=st.sampled_from([1, 4]),
)
def test_every_scale_gives_a_verdict_that_agrees_with_torch_float64(exponent, seed, n, m, d):
    """Scales 1 to 10^6: compare returns a verdict (no exception), and torch.allclose's rule on torch's own
    float32 output against torch's float64 agrees with it wherever float64 is clear of the tolerance."""
    torch = pytest.importorskip("torch")
    from symattn.kernel import compare

    rng = np.random.default_rng(seed)
    q, k, v = ((rng.standard_normal((1, 1, s, d)) * 10.0**exponent).astype(np.float32) for s in (n, m, m))
    tq, tk, tv = (torch.tensor(t) for t in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv)
    wide = torch.nn.functional.scaled_dot_product_attention(tq.double(), tk.double(), tv.double())
    report = compare(out.numpy(), q, k, v, rtol=1e-5, atol=1e-8)
    share = ((out.double() - wide).abs() / (1e-8 + 1e-5 * wide.abs())).max().item()
    if abs(share - 1) > 1e-3:  # float64's own error is far below this
        assert report.ok == (share <= 1)


def test_the_cli_refuses_a_huge_sink_of_a_spec_in_one_line(tmp_path, capsys):
    from tests.test_compare_spec_variants import arrays, cli, reference, write

    q, k, v = arrays()
    spec = write(tmp_path, ["sinks = [1e38, 0, 0, 0]"], q=q, k=k, v=v, o=reference(q, k, v))
    code, text, err = cli(capsys, spec, tmp_path / "o.npy")
    assert (code, text) == (2, "")  # the spec's own limit, |s| ≤ 100 (sinks[1]: the first head, 1-based)
    assert err == f"symattn: {spec}: sinks[1]: a sink logit must be at most 100 in size, got 1e38\n"


def test_flash_attention_s_ratio_on_saturated_rows_against_mpmath():
    """A naive result one ULP off at one entry: its error is the largest either way, and the ratio of the
    largest errors is decided from the balls (about 10^-99 one way, 10^99 the other)."""
    torch = pytest.importorskip("torch")
    from symattn.kernel import compare

    q, k, v = _inputs(1e2)
    o = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(t) for t in (q, k, v))).numpy()
    naive = o.copy()
    naive[0, 1, 3, 2] = np.nextafter(naive[0, 1, 3, 2], np.float32(np.inf))
    d = {p: _exact(q, k, v, *p, float(o[p]))[0] for p in np.ndindex(o.shape)}
    top = max(abs(x) for x in d.values())
    off = max(abs(d[p] - (mpmath.mpf(float(naive[p])) - mpmath.mpf(float(o[p])))) for p in d)
    good, bad = compare(o, q, k, v, reference=naive), compare(naive, q, k, v, reference=o)
    assert good.ok and good.verdict.ratio == _three(top / off)
    assert not bad.ok and bad.verdict.ratio == _three(off / top) and bad.worst_place == "out[0, 1, 3, 2]"
    entry = bad.comparison.entries.entry(3, 4 + 2)  # x one ULP past v_j, the exact value e^(-10^4)-close to v_j
    # |x − e| = 1 ULP − d: 1.00 to 50 digits, but past the bucket's edge 1 exactly where d < 0
    assert float(naive[0, 1, 3, 2]) - float(o[0, 1, 3, 2]) == float(_ulp32(mpmath.mpf(float(o[0, 1, 3, 2]))))
    assert entry.ulps == Decimal("1.00") and entry.bucket == (2 if d[(0, 1, 3, 2)] > 0 else 3)


def test_a_figure_past_ten_to_the_ten_to_the_thirteen_is_refused_in_one_line(tmp_path, capsys):
    """Inputs of size 10^9: the weights are e^(−10^17); their figures lie past what the reports rank."""
    torch = pytest.importorskip("torch")
    from symattn.input.errors import EvaluationError
    from symattn.kernel import compare
    from tests.test_compare_spec_variants import cli, write

    q, k, v = _inputs(1e9)
    o = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(t) for t in (q, k, v))).numpy()
    with pytest.raises(EvaluationError) as info:
        compare(o, q, k, v)
    assert str(info.value) == (
        "out: the error of out[0, 0, 0, 0] is near 10^-79245010066671760, past 10^±10000000000000"
    )
    causal = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(t) for t in (q, k, v)), is_causal=True)
    spec = write(tmp_path, [], q=q, k=k, v=v, o=causal.numpy())
    code, text, err = cli(capsys, spec, tmp_path / "o.npy")
    place = "the error of o[0, 0, 1, 0] is near 10^-476796546900950976"  # causal: query 0 has one key
    assert (code, text) == (2, "")
    assert err == f"symattn: {spec}: {tmp_path / 'o.npy'}: {place}, past 10^±10000000000000\n"


@pytest.mark.parametrize("scale", [1e2, 1e4, 1e6])
def test_the_lse_and_a_softcap_of_saturated_rows_get_torch_float64_s_verdict(scale):
    """The LSE of a saturated row (its z_max plus e^(−10^4)) and soft-capped outputs of huge scores: a verdict,
    and torch.allclose's against torch's float64 agrees with it."""
    torch = pytest.importorskip("torch")
    from symattn.kernel import compare

    q, k, v = _inputs(scale)

    def reference(dtype):  # (LSE, soft-capped output) in torch, in that dtype
        tq, tk, tv = (torch.tensor(t).to(dtype) for t in (q, k, v))
        s = tq @ tk.transpose(-1, -2) / 2
        return torch.logsumexp(s, -1), torch.softmax(30 * torch.tanh(s / 30), -1) @ tv

    got, exact = reference(torch.float32), reference(torch.float64)
    for n, options in enumerate(({"kind": "lse"}, {"softcap": 30.0})):
        report = compare(got[n].numpy(), q, k, v, rtol=1e-5, atol=1e-8, **options)
        share = ((got[n].double() - exact[n]).abs() / (1e-8 + 1e-5 * exact[n].abs())).max().item()
        assert abs(share - 1) > 1e-3 and report.ok == (share <= 1), options
