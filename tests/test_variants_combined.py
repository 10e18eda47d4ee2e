"""Issue 20's variants at once: grouped-query heads, a sliding window aligned bottom-right, cross-attention,
and ALiBi, soft-capping and sinks together, or RoPE (not yet with those three), on one spec, against
PyTorch float64 written out step by step."""

import json
import math
import random

import pytest

from symattn.api import solve

torch = pytest.importorskip("torch", reason="PyTorch is not installed (CI installs torch==2.13.0)")

pytestmark = pytest.mark.client


def rope(x, positions, base: float, style: str):
    """x (n, d) turned by position·base^(−2t/d), pairs (t, t + d/2) ("half") or (2t, 2t+1)."""
    n, d = x.shape
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    angle = positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angle), torch.sin(angle)
    if style == "half":
        a, b = x[:, : d // 2], x[:, d // 2 :]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], 1)
    a, b = x[:, 0::2], x[:, 1::2]
    out = torch.empty_like(x)
    out[:, 0::2], out[:, 1::2] = a * cos - b * sin, a * sin + b * cos
    return out


def reference(raw: dict):
    """The concatenated heads' output, in float64, each variant as its paper writes it."""

    def t(m):
        return torch.tensor([[float(x) for x in row] for row in m], dtype=torch.float64)

    Q, K, V = t(raw["Q"]), t(raw["K"]), t(raw["V"])
    H, G, dk = raw["heads"], raw["kv_heads"], Q.shape[1] // raw["heads"]
    n_q, n_k = Q.shape[0], K.shape[0]
    i, j = torch.arange(n_q)[:, None], torch.arange(n_k)[None, :]
    offset = n_k - n_q if raw["causal_align"] == "bottom-right" else 0
    allowed = (j <= i + offset) & (j > i + offset - raw["window"])
    out = []
    for h in range(H):
        g = h // (H // G)
        q, k, v = Q[:, h * dk : (h + 1) * dk], K[:, g * dk : (g + 1) * dk], V[:, g * dk : (g + 1) * dk]
        if raw.get("rope"):
            q = rope(q, torch.arange(n_q, dtype=torch.float64), float(raw["rope_base"]), raw["rope_style"])
            k = rope(k, torch.arange(n_k, dtype=torch.float64), float(raw["rope_base"]), raw["rope_style"])
        z = q @ k.T / math.sqrt(dk)
        if raw.get("alibi"):
            z = z - 2 ** (-8 * (h + 1) / H) * (i - j).abs()
        if "softcap" in raw:
            c = float(raw["softcap"])
            z = c * torch.tanh(z / c)
        z = z.masked_fill(~allowed, -math.inf)
        if "sinks" in raw:
            sink = torch.full((n_q, 1), float(raw["sinks"][h]), dtype=torch.float64)
            out.append(torch.softmax(torch.cat([z, sink], 1), 1)[:, :n_k] @ v)
        else:
            out.append(torch.softmax(z, 1) @ v)
    return torch.cat(out, 1)


def draw(seed: int) -> dict:
    rng = random.Random(seed)
    (H, G), dk = rng.choice([(2, 1), (4, 2), (4, 1)]), 2
    n_k = rng.randint(3, 5)
    n_q = rng.randint(2, n_k)

    def m(rows, cols):
        return [[f"{rng.randint(-9, 9) / 10:.1f}" for _ in range(cols)] for _ in range(rows)]

    raw = {
        "tokens": [f"q{r}" for r in range(n_q)],
        "heads": H,
        "kv_heads": G,
        "Q": m(n_q, H * dk),
        "K": m(n_k, G * dk),
        "V": [[str(rng.randint(-5, 5)) for _ in range(G * dk)] for _ in range(n_k)],
        "mask": "causal",
        "causal_align": "bottom-right",
        "window": rng.randint(2, n_k),
    }
    if n_q != n_k:  # cross-attention: the keys are labelled apart
        raw["key_tokens"] = [f"k{r}" for r in range(n_k)]
    if seed % 2:
        raw |= {
            "rope": True,
            "rope_base": rng.choice(["10000", "100"]),
            "rope_style": rng.choice(["half", "interleaved"]),
        }
    else:
        raw |= {
            "alibi": True,
            "softcap": rng.choice(["2", "5", "0.5"]),
            "sinks": [f"{rng.randint(-10, 10) / 10:.1f}" for _ in range(H)],
        }
    return raw


def test_rope_with_a_score_variant_is_refused_in_one_line():
    from symattn.input.errors import SpecError
    from symattn.input.spec import load_spec

    raw = draw(1) | {"softcap": "2"}
    with pytest.raises(SpecError) as info:
        load_spec(raw)
    assert str(info.value) == "<dict>: rope: rope together with softcap is not supported yet (each works on its own)"


@pytest.mark.parametrize("seed", range(8))
def test_every_variant_at_once_agrees_with_torch(seed):
    raw = draw(seed)
    got = solve(raw).compute(digits=20)
    values = torch.tensor([[float(x) for x in row] for row in got["concat"]["value"]], dtype=torch.float64)
    want = reference(raw)
    floor = 1e-13 * want.abs().max().item()
    assert torch.allclose(values, want, rtol=1e-12, atol=floor), json.dumps(raw)
