"""A plain spec's window as FlashAttention's window_size pair (kmisc6): ``window = [left, right]`` lets query i
attend key j iff i + offset − left ≤ j ≤ i + offset + right (−1: no bound that side), as a layout spec and
symattn.kernel.compare take it; the same checks and one-line errors as a layout spec; torch float64 agreement
on the exact path, the float64 path and a sweep's naive reference."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tests.test_compare_layouts import compare as run_compare
from tests.test_compare_layouts import write

torch = pytest.importorskip("torch")
FILES = ['Q = "q.npy"', 'K = "k.npy"', 'V = "v.npy"']


def allowed(n, m, window, causal=False, align="top-left"):
    """FlashAttention's rule (its construct_local_mask), as a boolean (n, m) tensor."""
    left, right = window
    top = torch.arange(n)[:, None] + (m - n if align == "bottom-right" else 0)
    j = torch.arange(m)[None, :]
    ok = torch.ones(n, m, dtype=torch.bool)
    if left >= 0:
        ok &= top - left <= j
    if right >= 0:
        ok &= j <= top + right
    if causal:
        ok &= j <= top
    return ok


def reference(q, k, v, window, causal=False, align="top-left"):
    """torch float64 attention of (..., N, D) tensors under the window's mask."""
    q, k, v = (t.double() for t in (q, k, v))
    z = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    z = z.masked_fill(~allowed(q.shape[-2], k.shape[-2], window, causal, align), -math.inf)
    return torch.softmax(z, -1) @ v


@pytest.mark.parametrize(
    ("window", "causal", "align"),
    [
        ((2, 1), False, "top-left"),
        ((1, -1), False, "bottom-right"),
        ((-1, 0), True, "bottom-right"),
        ((3, 2), True, "top-left"),
    ],
)
def test_a_plain_spec_takes_the_pair_on_the_float64_path_as_the_api_does(tmp_path, capsys, window, causal, align):
    from symattn.kernel import compare

    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(7 if name == "q" else 9, 4, generator=gen) for name in "qkv")
    out = reference(q, k, v, window, causal, align).float()
    lines = [*FILES, f"window = [{window[0]}, {window[1]}]", f'causal_align = "{align}"']
    lines += ['mask = "causal"'] if causal else []
    spec = write(tmp_path, lines, q=q, k=k, v=v, o=out)
    tight = ["--rtol", "1.2e-7", "--atol", "1e-13", "--format", "json"]
    code, text, err = run_compare(capsys, spec, tmp_path / "o.npy", *tight)
    assert (code, err) == (0, "")
    api = compare(out, q, k, v, window=window, causal=causal, causal_align=align, rtol=1.2e-7, atol=1e-13)
    got, want = json.loads(text), json.loads(api.to_json())
    assert got["summary"] == want["summary"] and got["verdict"]["pass"] is True
    other = reference(q, k, v, (window[0] + 1, window[1]), causal, align).float()
    np.save(tmp_path / "o.npy", other.numpy())
    assert run_compare(capsys, spec, tmp_path / "o.npy", *tight)[0] == 1


def test_a_plain_specs_pair_on_the_exact_path_is_torch_float64s(tmp_path, capsys):
    from symattn.cli.commands import main

    Q = [[1, 2], [3, 4], [0, 1], [2, 2], [1, -1]]
    K = [[1, 0], [0, 1], [1, 1], [2, 0], [0, 2], [1, -2]]
    V = [[1, 2], [3, 4], [5, 6], [7, 8], [0, 1], [2, 0]]
    text = f'Q = {Q}\nK = {K}\nV = {V}\nwindow = [1, 2]\ncausal_align = "bottom-right"\n'
    (tmp_path / "s.toml").write_text(text)
    assert main(["compute", str(tmp_path / "s.toml")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["window"] == [1, 2]
    assert data["mask"] == allowed(5, 6, (1, 2), align="bottom-right").tolist()
    want = reference(torch.tensor(Q), torch.tensor(K), torch.tensor(V), (1, 2), align="bottom-right")
    got = torch.tensor([[float(x) for x in row] for row in data["output"]["value"]], dtype=torch.float64)
    assert torch.allclose(got, want, rtol=1e-13, atol=0)


BAD = [
    ("[0]", "(0,)"),
    ("[1, 2, 3]", "(1, 2, 3)"),
    ("[-2, 0]", "(-2, 0)"),
    ("[1.5, 0]", "(1.5, 0)"),
    ('["a", 1]', "('a', 1)"),
    ("[true, 1]", "(True, 1)"),
    ("[2147483648, 0]", "(2147483648, 0)"),
]


@pytest.mark.parametrize(("raw", "got"), BAD)
def test_a_bad_pair_is_the_layout_specs_one_line(tmp_path, capsys, raw, got):
    from symattn.cli.commands import main

    why = (
        "window: expected keys from 1 to 2147483647 (a causal window ending at the diagonal) or FlashAttention's "
        f"window_size (left, right), each -1 (no bound) or 0 to 2147483647; got {got}"
    )
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 2, 4, 4)).astype(np.float32) for _ in range(3))
    plain = write(tmp_path, [*FILES, f"window = {raw}"], q=q[0, 0], k=k[0, 0], v=v[0, 0])
    for argv in (["compare", plain, str(tmp_path / "q.npy")], ["render", plain, "-o", str(tmp_path / "s.md")]):
        assert main(argv) == 2
        assert capsys.readouterr() == ("", f"symattn: {plain}: {why}\n")
    layout = write(
        tmp_path,
        [*FILES, f"window = {raw}", 'cu_seqlens_q = "cu.npy"', 'cu_seqlens_k = "cu.npy"'],
        q=q[0].transpose(1, 0, 2),
        k=k[0].transpose(1, 0, 2),
        v=v[0].transpose(1, 0, 2),
        cu=np.array([0, 4], np.int32),
    )
    np.save(tmp_path / "o.npy", q[0].transpose(1, 0, 2))
    assert run_compare(capsys, layout, tmp_path / "o.npy") == (2, "", f"symattn: {layout}: {why}\n")


def test_a_row_the_pair_leaves_no_key_is_one_line(tmp_path, capsys):
    from symattn.cli.commands import main

    text = "Q = [[1, 2], [3, 4], [0, 1]]\nK = [[1, 0], [0, 1]]\nV = [[1, 2], [3, 4]]\nwindow = [0, 0]\n"
    (tmp_path / "s.toml").write_text(text)
    assert main(["render", str(tmp_path / "s.toml"), "-o", str(tmp_path / "s.md")]) == 2
    assert capsys.readouterr() == (
        "",
        f"symattn: {tmp_path / 's.toml'}: window: row 3 (t3) may attend to no key (window = [0, 0], "
        "FlashAttention's window_size, leaves it none); softmax is undefined there\n",
    )
    (tmp_path / "s.toml").write_text(text.replace("[0, 0]", "[-1, -1]"))  # no bound either side: no window
    assert main(["compute", str(tmp_path / "s.toml")]) == 0
    assert "window" not in json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_derivation_says_the_pair(tmp_path, lang):
    from symattn.cli.commands import main

    text = "Q = [[1, 2], [3, 4], [0, 1], [2, 2]]\nK = [[1, 0], [0, 1], [1, 1], [2, 0]]\nV = [[1, 2], [3, 4], [5, 6], [7, 8]]\n"
    (tmp_path / "s.toml").write_text(text + 'window = [1, 0]\nmask = "causal"\nfocus = "3"\n')
    assert main(["render", str(tmp_path / "s.toml"), "--lang", lang, "-o", str(tmp_path / "s.md")]) == 0
    lines = (tmp_path / "s.md").read_text(encoding="utf-8").splitlines()
    said = {
        "en": [
            "Window \\[1, 0\\], FlashAttention's window\\_size: query $i$ may look only at the keys $i - 1 \\le j \\le i$ "
            "around its diagonal (−1 leaves a side without bound).",
            "For “t3” ($i = 3$): $1 < j \\le 3$, so it may look at “t2”, “t3”.",
        ],
        "zh": [
            "窗口 \\[1, 0\\]，即 FlashAttention 的 window\\_size：查询 $i$ 只能看对角线两侧 $i - 1 \\le j \\le i$ 的键"
            "（−1 表示那一侧不设界）。",
        ],
    }
    for line in said[lang]:
        assert line in lines


@pytest.mark.parametrize(("window", "causal"), [((2, 1), False), ((1, -1), False), ((-1, 0), True), ((3, 0), True)])
def test_a_sweeps_naive_reference_takes_the_pair(window, causal):
    from symattn.sweep.reference import naive

    gen = torch.Generator().manual_seed(9)
    q, k, v = (torch.randn(1, 2, 6, 4, generator=gen, dtype=torch.float64) for _ in range(3))
    out, _ = naive(q, k, v, causal=causal, causal_align="top-left", keywords={"window": window})
    assert torch.allclose(out, reference(q, k, v, window, causal), rtol=1e-13, atol=1e-15)


def test_a_sweeps_grid_takes_the_pair_with_the_same_checks(tmp_path):
    from symattn.input.errors import SpecError
    from symattn.sweep.grid import load_grid

    head = '[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\n'
    (tmp_path / "grid.toml").write_text(head + "window = [0, 2, [8, 8], [-1, 0]]\n")
    assert [c.point["window"] for c in load_grid(str(tmp_path / "grid.toml")).cases] == [0, 2, [8, 8], [-1, 0]]
    (tmp_path / "grid.toml").write_text(head + "window = [[8, -2]]\n")
    with pytest.raises(SpecError) as info:
        load_grid(str(tmp_path / "grid.toml"))
    assert str(info.value) == (
        f"{tmp_path / 'grid.toml'}: grid.window[1]: expected keys from 1 to 2147483647 (a causal window ending at "
        "the diagonal) or FlashAttention's window_size (left, right), each -1 (no bound) or 0 to 2147483647; got "
        "(8, -2)"
    )
