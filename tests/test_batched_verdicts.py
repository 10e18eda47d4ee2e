"""compare on (B, H, N, D) results with grouped-query K and V (issue 28): verdicts for the whole and for each
(batch, head), places named by their axes with numpy's 0-based indices, LSE in both bases, and each head's
row-relative figures on its own row.

The inputs and results come from torch's SDPA; the figures a verdict prints are checked against torch's
float64 SDPA of the same inputs (an independent reference, far closer than the three digits shown).
"""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from symattn.cli.commands import main
from symattn.input.decimals import significant_exact
from symattn.kernel.comparison import number_text

torch = pytest.importorskip("torch")
F = torch.nn.functional
B, H, G, N, D = 2, 4, 2, 128, 32  # 4 query heads share 2 key/value heads
PLACE = {"batch": 1, "head": 2, "query": 77, "column": 5}


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """q, k, v, torch's float32 output o, a bfloat16 naive result n, o with 0.25 planted at o[1, 2, 77, 5],
    and torch's float64 output as the reference."""
    folder = tmp_path_factory.mktemp("gqa")
    rng = np.random.default_rng(28)
    Q = rng.standard_normal((B, H, N, D)).astype(np.float32)
    K, V = (rng.standard_normal((B, G, N, D)).astype(np.float32) for _ in range(2))
    t = torch.tensor
    out = F.scaled_dot_product_attention(t(Q), t(K), t(V), enable_gqa=True).numpy()
    naive = F.scaled_dot_product_attention(*(t(a).bfloat16() for a in (Q, K, V)), enable_gqa=True).float().numpy()
    ref = F.scaled_dot_product_attention(*(t(a).double() for a in (Q, K, V)), enable_gqa=True).numpy()
    bad = out.copy()
    bad[1, 2, 77, 5] += np.float32(0.25)
    for name, a in zip(("q", "k", "v", "o", "n", "bad"), (Q, K, V, out, naive, bad)):
        np.save(folder / f"{name}.npy", a)
    (folder / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')
    return folder, (Q, K, V, out, naive, bad, ref)


def run(capsys, folder, *args: str) -> tuple[int, str]:
    code = main(["compare", str(folder / "s.toml"), *args])
    captured = capsys.readouterr()
    assert captured.err == ""
    return code, captured.out


def figure(x: float) -> str:
    """Three significant digits, as compare shows a ratio or a share."""
    return number_text(significant_exact(Fraction(x), 3))


def test_an_error_planted_at_o_1_2_77_5_is_named_there(kernel, capsys):
    folder, (*_, bad, ref) = kernel
    code, out = run(capsys, folder, str(folder / "bad.npy"), "--format", "json")
    assert code == 0  # no verdict asked: the figures only
    data = json.loads(out)
    assert data["places"] == "0-based, as numpy indexes: o[batch, head, query, column]"
    summary = data["summary"]
    assert summary["max_ulps_at"] == summary["max_relative_at"] == summary["max_row_relative_at"] == PLACE
    planted = [e for e in data["entries"] if {k: e[k] for k in PLACE} == PLACE]
    assert len(planted) == 1 and planted[0]["value"] == str(significant_exact(Fraction(float(bad[1, 2, 77, 5])), 17))
    assert planted[0]["exact"].startswith(str(significant_exact(Fraction(ref[1, 2, 77, 5]), 10))[:8])
    head = data["heads"][1 * H + 2]
    assert (head["batch"], head["head"], head["max_ulps_at"]) == (1, 2, PLACE)
    code, text = run(capsys, folder, str(folder / "bad.npy"), "--naive", str(folder / "n.npy"))
    assert code == 1
    assert "Places are 0-based, as numpy indexes: o[batch, head, query, column].\n" in text
    assert "The largest absolute error |out − exact| is at o[1, 2, 77, 5].\n" in text
    assert "Largest error relative to its row's largest magnitude: " in text and ", at o[1, 2, 77, 5].\n" in text
    assert "\no[1, 2, 77, 5]    " in text  # the first of the ten largest errors


def test_flash_verdicts_for_the_whole_and_each_head(kernel, capsys):
    folder, (_, _, _, out, naive, bad, ref) = kernel
    code, text = run(capsys, folder, str(folder / "o.npy"), "--naive", str(folder / "n.npy"), "--format", "json")
    assert code == 0
    data = json.loads(text)
    whole = np.abs(out - ref).max() / np.abs(naive - ref).max()
    assert data["verdict"]["pass"] is True and data["ratio"] == figure(whole)
    for h in data["heads"]:
        b, k = h["batch"], h["head"]
        mine = np.abs(out[b, k] - ref[b, k]).max() / np.abs(naive[b, k] - ref[b, k]).max()
        assert (h["verdict"]["pass"], h["verdict"]["ratio"]) == (True, figure(mine)), (b, k)
        assert (h["verdict"]["worst_at"]["batch"], h["verdict"]["worst_at"]["head"]) == (b, k)
    code, text = run(capsys, folder, str(folder / "bad.npy"), "--naive", str(folder / "n.npy"), "--format", "json")
    assert code == 1  # the planted error: 0.25 against the naive result's ~1e-2
    data = json.loads(text)
    assert data["verdict"]["worst_at"] == PLACE and data["verdict"]["pass"] is False
    assert data["ratio"] == figure(np.abs(bad - ref).max() / np.abs(naive - ref).max())
    assert [(h["batch"], h["head"]) for h in data["heads"] if not h["verdict"]["pass"]] == [(1, 2)]
    assert data["heads"][1 * H + 2]["verdict"]["ratio"] == figure(0.25 / np.abs(naive[1, 2] - ref[1, 2]).max())
    code, text = run(capsys, folder, str(folder / "bad.npy"), "--naive", str(folder / "n.npy"))
    assert "  batch 1, head 2: " in text and "\n    fail by FlashAttention's rule: ratio " in text
    assert text.count("    pass by FlashAttention's rule: ratio ") == B * H - 1


def test_allclose_verdicts_for_the_whole_and_each_head(kernel, capsys):
    folder, (*_, ref) = kernel
    args = ("--rtol", "1e-3", "--atol", "1e-4", "--format", "json")
    code, text = run(capsys, folder, str(folder / "o.npy"), *args)
    assert code == 0
    data = json.loads(text)
    assert data["verdict"]["pass"] is True and all(h["verdict"]["pass"] for h in data["heads"])
    code, text = run(capsys, folder, str(folder / "bad.npy"), *args)
    assert code == 1
    data = json.loads(text)
    assert data["verdict"]["worst_at"] == PLACE
    assert [(h["batch"], h["head"]) for h in data["heads"] if not h["verdict"]["pass"]] == [(1, 2)]
    bad = kernel[1][5]
    share = abs(float(bad[1, 2, 77, 5]) - ref[1, 2, 77, 5]) / (1e-4 + 1e-3 * abs(ref[1, 2, 77, 5]))
    assert data["verdict"]["share"] == data["heads"][1 * H + 2]["verdict"]["share"] == figure(share)


def test_max_ulp_for_the_whole_and_each_head(kernel, capsys):
    folder, _ = kernel
    code, text = run(capsys, folder, str(folder / "o.npy"), "--max-ulp", "1000000", "--format", "json")
    data = json.loads(text)
    top = {"max_ulps": data["summary"]["max_ulps"], "max_ulps_at": data["summary"]["max_ulps_at"]}
    assert code == 0 and data["max_ulp"] == {"bound": "1000000", "pass": True, "over": 0, **top}
    assert all(h["max_ulp_pass"] for h in data["heads"])
    worst = sorted(Decimal(h["max_ulps"]) for h in data["heads"])
    bound = str(worst[-2])  # every head but the worst is at most this
    code, text = run(capsys, folder, str(folder / "o.npy"), "--max-ulp", bound, "--format", "json")
    data = json.loads(text)
    over = sum(1 for e in data["entries"] if e["ulps"] is not None and Decimal(e["ulps"]) > Decimal(bound))
    assert over >= 1  # what exceeded the bound: how many entries, the largest error and where
    assert code == 1 and data["max_ulp"] == {"bound": bound, "pass": False, "over": over, **top}
    assert [h["max_ulp_pass"] for h in data["heads"]].count(False) == 1
    code, text = run(capsys, folder, str(folder / "o.npy"), "--max-ulp", bound)
    total = len(data["entries"])
    assert (
        f"Fail by --max-ulp {bound}: {over} of {total} entries exceed it; the largest error is {worst[-1]} ULP, at o["
        in text
    )
    assert text.count(f"    fail by --max-ulp {bound}: largest error {worst[-1]} ULP at o[") == 1


def test_a_naive_result_of_another_shape_is_one_line(kernel, capsys):
    folder, (*_, naive, _, _) = kernel
    np.save(folder / "short.npy", naive[:, :, :, :16])
    assert main(["compare", str(folder / "s.toml"), str(folder / "o.npy"), "--naive", str(folder / "short.npy")]) == 2
    assert capsys.readouterr().err == (
        f"symattn: {folder / 'short.npy'}: shape: the naive result has shape (2, 4, 128, 16) and the result "
        "(2, 4, 128, 32)\n"
    )


@pytest.mark.parametrize("base", ["e", "2"])
def test_lse_verdicts_in_both_bases(kernel, capsys, base):
    folder, (Q, K, V, *_) = kernel
    scores = torch.einsum("bhnd,bhmd->bhnm", torch.tensor(Q).double(), torch.tensor(K).double().repeat_interleave(2, 1))
    lse = torch.logsumexp(scores / np.sqrt(D), -1) / (np.log(2) if base == "2" else 1)
    np.save(folder / f"lse{base}.npy", lse.float().numpy())
    bad = lse.float().numpy()
    bad[0, 3, 100] += 0.5
    np.save(folder / f"lse{base}-bad.npy", bad)
    args = ("--quantity", "lse", "--lse-base", base, "--rtol", "1e-6", "--format", "json")
    code, text = run(capsys, folder, str(folder / f"lse{base}.npy"), *args)
    data = json.loads(text)
    assert code == 0 and data["places"] == "0-based, as numpy indexes: lse[batch, head, query]"
    assert data["summary"]["entries"] == B * H * N and len(data["heads"]) == B * H
    assert data["verdict"]["pass"] is True and all(h["verdict"]["pass"] for h in data["heads"])
    assert Decimal(data["summary"]["max_ulps"]) <= Decimal("0.5")  # float32 of float64's: correctly rounded
    code, text = run(capsys, folder, str(folder / f"lse{base}-bad.npy"), *args)
    data = json.loads(text)
    assert code == 1 and data["verdict"]["worst_at"] == {"batch": 0, "head": 3, "query": 100}
    assert data["summary"]["max_ulps_at"] == {"batch": 0, "head": 3, "query": 100}
    assert [(h["batch"], h["head"]) for h in data["heads"] if not h["verdict"]["pass"]] == [(0, 3)]


def test_a_head_s_row_relative_figures_are_the_same_alone_and_in_the_batch(kernel, capsys, tmp_path):
    folder, (Q, K, V, out, *_) = kernel
    code, text = run(capsys, folder, str(folder / "o.npy"), "--format", "json")
    whole = json.loads(text)
    np.save(tmp_path / "q.npy", Q[1, 2])
    np.save(tmp_path / "k.npy", K[1, 2 // (H // G)])
    np.save(tmp_path / "v.npy", V[1, 2 // (H // G)])
    np.save(tmp_path / "o.npy", out[1, 2])
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')
    code, text = run(capsys, tmp_path, str(tmp_path / "o.npy"), "--format", "json")
    alone = json.loads(text)
    assert alone["places"] == "0-based, as numpy indexes: o[query, column]"
    mine = [e for e in whole["entries"] if (e["batch"], e["head"]) == (1, 2)]
    assert [(e["query"], e["column"], e["row_relative"]) for e in mine] == [
        (e["query"], e["column"], e["row_relative"]) for e in alone["entries"]
    ]
    # by hand: |x − exact| / max |exact| over the head's own row, not over every head of that query
    ref = F.scaled_dot_product_attention(*(torch.tensor(a).double() for a in (Q, K, V)), enable_gqa=True).numpy()
    i, j = 77, 5
    by_hand = abs(float(out[1, 2, i, j]) - ref[1, 2, i, j]) / np.abs(ref[1, 2, i]).max()
    assert mine[i * D + j]["row_relative"] == figure(by_hand)


def test_the_bnhd_layout_names_its_own_axes(kernel, capsys, tmp_path):
    _, (Q, K, V, _, _, bad, _) = kernel
    for name, a in zip(("q", "k", "v", "bad"), (Q, K, V, bad)):
        np.save(tmp_path / f"{name}.npy", a.transpose(0, 2, 1, 3).copy())
    (tmp_path / "s.toml").write_text('layout = "bnhd"\nQ = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')
    code, text = run(capsys, tmp_path, str(tmp_path / "bad.npy"), "--rtol", "1e-3", "--atol", "1e-4")
    assert code == 1
    assert "Places are 0-based, as numpy indexes: o[batch, query, head, column].\n" in text
    assert "The worst entry is o[1, 77, 2, 5], where |out − exact| / (atol + rtol·|exact|) = " in text
