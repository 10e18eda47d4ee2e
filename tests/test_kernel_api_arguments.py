"""compare's keywords as a kernel's test computes them (a helper's attack): a window of numpy's or torch's
integers is a window; a causal flag that is not one, a scale that is not positive and a tensor without dense
values are one clear SpecError each."""

from __future__ import annotations

import numpy as np
import pytest

from symattn.input.errors import SpecError
from symattn.kernel import compare


def case():
    """(out, q): one (1, 2, 8, 4) head pair, q = k = v, causal with a window of 4 keys, in float32."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 2, 8, 4)).astype(np.float32)
    x = q.astype(np.float64)
    s = x @ x.transpose(0, 1, 3, 2) / 2
    keep = np.tril(np.ones((8, 8), bool)) & ~np.tril(np.ones((8, 8), bool), -4)
    s = np.where(keep, s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    return ((w / w.sum(-1, keepdims=True)) @ x).astype(np.float32), q


@pytest.mark.parametrize("window", [4, np.int64(4), np.int32(4), (np.int64(3), np.int64(0)), [3, 0]])
def test_a_window_of_numpys_integers_is_the_window(window):
    out, q = case()
    plain = compare(out, q, q, q, causal=True, window=4, max_ulp=4)
    report = compare(out, q, q, q, causal=True, window=window, max_ulp=4)
    assert report.ok and report.to_json() == plain.to_json()


def test_a_window_of_a_torch_integer_is_the_window():
    torch = pytest.importorskip("torch")
    out, q = case()
    plain = compare(out, q, q, q, causal=True, window=4, max_ulp=4)
    assert compare(out, q, q, q, causal=True, window=torch.tensor(4), max_ulp=4).to_json() == plain.to_json()


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"causal": "yes"}, "causal: expected True or False, got 'yes'"),
        ({"causal": 1}, "causal: expected True or False, got 1"),
        ({"scale": -1.0}, "scale: -1.0: must be positive"),
        ({"scale": 0}, "scale: 0: must be positive"),
        ({"window": 4.0}, "window: expected keys from 1 to 2147483647 (a causal window ending at the diagonal) or "
         "FlashAttention's window_size (left, right), each -1 (no bound) or 0 to 2147483647; got 4.0"),
    ],
)  # fmt: skip
def test_a_keyword_out_of_form_is_one_line(keywords, message):
    out, q = case()
    with pytest.raises(SpecError) as info:
        compare(out, q, q, q, **keywords)
    assert str(info.value) == message


def test_a_tensor_without_dense_values_is_one_line():
    torch = pytest.importorskip("torch")
    out, q = case()
    for tensor, form in (
        (torch.zeros(1, 2, 8, 4, device="meta"), "meta"),
        (torch.zeros(1, 2, 8, 4).to_sparse(), "sparse_coo"),
    ):
        with pytest.raises(SpecError) as info:
            compare(out, tensor, q, q)
        assert str(info.value) == f"q: a {form} tensor: a dense one, with its values, is needed"
    assert compare(out, q, q, q, causal=True, window=4, scale=np.float64(0.5), max_ulp=4).ok


def test_a_nested_tensor_and_a_meta_cu_seqlens_are_one_line():
    """torch's own errors from deep inside before: 'NestedTensorImpl doesn't support sizes', 'Cannot copy out
    of meta tensor'."""
    torch = pytest.importorskip("torch")
    x = torch.ones(2, 4, 8)
    with pytest.warns(UserWarning):  # torch's: nested tensors are a prototype
        nested = torch.nested.nested_tensor([x[0], x[1]])
    with pytest.raises(SpecError) as info:
        compare(x, nested, x, x)
    assert str(info.value) == "q: a nested tensor: a dense one, with its values, is needed"
    cu = torch.tensor([0, 2], dtype=torch.int32)
    with pytest.raises(SpecError) as info:
        compare(x, x, x, x, cu_seqlens_q=cu.to("meta"), cu_seqlens_k=cu)
    assert str(info.value) == "cu_seqlens_q: a meta tensor: a dense one, with its values, is needed"
    assert compare(x, x, x, x, cu_seqlens_q=cu, cu_seqlens_k=cu).ok
