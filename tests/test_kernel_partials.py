"""Split-KV partials (flash-decoding, issue 30 item 5): each split's (O_i, LSE_i) and their merge."""

from __future__ import annotations

import math

import pytest

from symattn.input.errors import ShapeError, SpecError

torch = pytest.importorskip("torch")
F = torch.nn.functional


def split_kernel(q, k, v, offsets, base=math.e):
    """A split-KV kernel in float64, rounded to float32: each split's O_i and LSE_i (B, H, N), then the merge."""
    q, k, v = (t.double() for t in (q, k, v))
    outs, lses = [], []
    for a, b in zip(offsets, offsets[1:]):
        z = q @ k[:, :, a:b].transpose(-1, -2) / math.sqrt(q.shape[-1])
        lse = torch.logsumexp(z, dim=-1)
        outs.append(torch.softmax(z, dim=-1) @ v[:, :, a:b])
        lses.append(lse / math.log(base))
    O, L = torch.stack(outs), torch.stack(lses)
    total = torch.logsumexp(L * math.log(base), dim=0)
    merged = (torch.exp(L * math.log(base) - total)[..., None] * O).sum(0)
    return O.float(), L.float(), merged.float(), (total / math.log(base)).float()


@pytest.fixture(scope="module")
def decode():
    gen = torch.Generator().manual_seed(9)
    q = torch.randn(2, 4, 1, 32, generator=gen)  # one query per sequence: decoding
    k, v = (torch.randn(2, 4, 100, 32, generator=gen) for _ in range(2))
    return q, k, v


def test_each_split_and_the_merge_against_the_exact_values(decode):
    from symattn.kernel import compare_partials

    q, k, v = decode
    O, L, out, lse = split_kernel(q, k, v, [0, 25, 50, 75, 100])
    report = compare_partials(O, L, q, k, v, splits=4, out=out, lse=lse, rtol=1e-6, atol=1e-6)
    assert report.ok and report.splits == ((0, 25), (25, 50), (50, 75), (75, 100))
    assert [name for name, _ in report.reports][-3:] == [
        "split 3 (keys 75 to 99): LSE_3",
        "the merge: O",
        "the merge: LSE",
    ]
    # FlashInfer's base-2 LSE read as natural: every LSE_i is off; the outputs are not
    O2, L2, _, _ = split_kernel(q, k, v, [0, 40, 100], base=2)
    two = compare_partials(O2, L2, q, k, v, splits=[0, 40, 100], rtol=1e-6, atol=1e-6)
    assert all(r.ok for r in two.outputs) and not any(r.ok for r in two.lses)
    assert compare_partials(O2, L2, q, k, v, splits=[0, 40, 100], lse_base="2", rtol=1e-6, atol=1e-6).ok


def test_an_error_planted_in_one_split_is_named_there(decode):
    from symattn.kernel import compare_partials

    q, k, v = decode
    O, L, _, _ = split_kernel(q, k, v, [0, 50, 100])
    O[1, 1, 2, 0, 7] += 0.01
    report = compare_partials(O, L, q, k, v, splits=2, rtol=1e-6, atol=1e-6)
    assert [r.ok for r in report.outputs] == [True, False] and all(r.ok for r in report.lses)
    assert report.outputs[1].worst_place == "partials_out[1][1, 2, 0, 7]"


def test_splits_that_do_not_fit_are_one_line(decode):
    from symattn.kernel import compare_partials

    q, k, v = decode
    O, L, _, _ = split_kernel(q, k, v, [0, 50, 100])
    cases = [
        (3, ShapeError, "partials_out: shape: 2 splits; the splits given make 3"),
        ([0, 60, 50, 100], SpecError, "splits: expected 0, then increasing key offsets ending at 100"),
        (0, SpecError, "splits: 0 splits of 100 keys; expected 1 to 100"),
    ]
    for splits, error, message in cases:
        with pytest.raises(error) as info:
            compare_partials(O, L, q, k, v, splits=splits)
        assert str(info.value) == message
    q4 = torch.randn(1, 1, 4, 8)
    k4 = torch.randn(1, 1, 8, 8)
    with pytest.raises(SpecError) as info:  # causal top-left: query 0 sees only key 0, none of split 1
        compare_partials([q4, q4], [q4[..., 0], q4[..., 0]], q4, k4, k4, splits=2, causal=True)
    assert str(info.value) == (
        "splits: keys 4 to 7: query 0 (0-based) attends none of them; a kernel writes LSE −inf and O 0 there, "
        "which this check does not take"
    )
