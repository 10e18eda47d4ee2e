"""Positions and KV-cache decoding (issue 32): the causal mask, windows, ALiBi and RoPE follow the tokens'
positions, not their rows."""

from decimal import Decimal

import pytest
import sympy

from symattn.derivation.derive import derive
from symattn.exact.factory import build
from symattn.input import builtin
from symattn.input.errors import SpecError
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render

Q = [[1, 0, 0.5, -1], [0, 1, 1, 0], [1, 1, -0.5, 2]]
K = [[1, 0, 2, 0], [0, 2, 0, 1], [2, 0, 1, 1]]
V = [[1, 0], [0, 1], [1, 1]]


def test_one_query_at_position_2_against_3_cached_keys_is_the_full_causal_last_row_exactly():
    full = build(load_spec({"Q": Q, "K": K, "V": V, "mask": "causal"}))
    step = build(load_spec({"Q": Q[2:], "K": K, "V": V, "mask": "causal", "positions": [2]}))
    assert step.output.row(0) == full.output.row(2)  # the same closed forms, not merely close
    # without positions the one query is row 0 and sees only the first key
    rows = build(load_spec({"Q": Q[2:], "K": K, "V": V, "mask": "causal"}))
    assert rows.output.row(0) == sympy.ImmutableMatrix([V[0]])


def _torch(q_pos, k_pos, slope, rope):
    """Attention in float64, written independently: RoPE's half pairs (t, t + d/2) turned by p·10000^(−2t/d),
    then z = q·k/√d − slope·|p_i − p_j| and the causal mask by positions."""
    torch = pytest.importorskip("torch")
    q, k, v = (torch.tensor(m, dtype=torch.float64) for m in (Q[2:], K, V))
    d = q.shape[1]
    if rope:
        theta = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)

        def turn(x, pos):
            angle = torch.tensor(pos, dtype=torch.float64)[:, None] * theta[None, :]
            a, b = x[:, : d // 2], x[:, d // 2 :]
            return torch.cat([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], dim=1)

        q, k = turn(q, q_pos), turn(k, k_pos)
    qp, kp = torch.tensor(q_pos)[:, None], torch.tensor(k_pos)[None, :]
    z = q @ k.T / d**0.5 - slope * (qp - kp).abs().to(torch.float64)
    z = z.masked_fill(kp > qp, float("-inf"))
    return torch.softmax(z, dim=-1) @ v


@pytest.mark.parametrize("rope, alibi", [(True, False), (False, True), (True, True)])
def test_positions_with_rope_and_alibi_agree_with_torch_float64(rope, alibi):
    extra = {"rope": True} if rope else {}
    if alibi:
        extra["alibi_slopes"] = [0.5]
    spec = load_spec(
        {"Q": Q[2:], "K": K, "V": V, "mask": "causal", "positions": [7], "key_positions": [3, 5, 7], **extra}
    )
    ours = build(spec).significant("output", 15)
    theirs = _torch([7], [3, 5, 7], 0.5 if alibi else 0.0, rope)
    for mine, other in zip(ours[0], theirs[0].tolist()):
        assert abs(float(mine) - other) <= 1e-13 * max(1.0, abs(other))
    assert isinstance(ours[0][0], Decimal)


def test_a_window_counts_positions():
    spec = load_spec(
        {"Q": Q[2:], "K": K, "V": V, "mask": "causal", "window": 3, "key_positions": [3, 5, 7], "positions": [7]}
    )
    assert spec.allowed == ((False, True, True),)  # a window of 3 at position 7 holds positions 5, 6, 7


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"positions": [1, 2]}, "<dict>: positions: expected 1 positions (one per row of the queries), got 2"),
        (
            {"positions": "2"},
            "<dict>: positions: expected a list of 1 positions (one per row of the queries), got a string",
        ),
        ({"key_positions": [0, -1, 2]}, "<dict>: key_positions[2]: expected a whole number from 0 to 1000000, got -1"),
        (
            {"positions": [2], "causal_align": "bottom-right"},
            "<dict>: causal_align: with positions the causal mask compares them; leave causal_align out",
        ),
        (
            {"key_positions": [0, 1, 2], "rope": True, "rope_cos": [[1]] * 3, "rope_sin": [[0]] * 3},
            "<dict>: rope_cos: does not combine with key_positions yet (its rows are positions 0, 1, …): give "
            "rope_base or rope_frequencies instead",
        ),
    ],
)
def test_bad_positions_are_one_line_errors(extra, message):
    with pytest.raises(SpecError) as info:
        load_spec({"Q": Q[2:], "K": K, "V": V, "mask": "causal", **extra})
    assert str(info.value) == message


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_decode_example_says_what_is_cached_and_what_is_new(lang):
    text = render(derive(load_spec(builtin.example_path("decode", lang))), "markdown")
    if lang == "en":
        assert "The keys “I”, “like”, “green” come from the KV cache" in text
        assert "new at this step: “tea”." in text
    else:
        assert "键「我」、「喜欢」、「绿」来自键值缓存" in text


@pytest.mark.parametrize(
    ("lang", "said", "row"),
    [
        (
            "en",
            "Query $i$ and key $j$ stand at the positions the spec gives, $p_i$ and $p_j$, not at their rows, so they "
            "are $\\lvert p_i - p_j\\rvert$ apart.\n",
            "The row of “tea” (position 3): its distance to each key and the bias that gives:\n",
        ),
        (
            "zh",
            "查询 $i$ 和键 $j$ 位于规格给出的位置 $p_i$ 和 $p_j$，而不是按行号，两者相距 $\\lvert p_i - p_j\\rvert$。\n",
            None,
        ),
    ],
)
def test_alibis_step_says_the_positions_it_uses(lang, said, row):
    # a decoding step: one query at position 3 against keys at 0..3; the distances are |3 − p_j|, not |0 − j|
    spec = {
        "lang": lang,
        "tokens": ["tea"],
        "key_tokens": ["I", "like", "green", "tea"],
        "positions": [3],
        "mask": "causal",
        "alibi_slopes": [0.5],
        "Q": [[0.5, -1]],
        "K": [[1, 0], [0, 2], [2, 0], [1, 1]],
        "V": [[1, 0], [0, 1], [1, 1], [2, 0]],
    }
    text = render(derive(load_spec(spec)), "markdown")
    assert said in text and "counted 0, 1, 2" not in text and "0、1、2" not in text
    assert row is None or row in text
    assert (
        "p_j = [0,\\ 1,\\ 2,\\ 3], \\qquad \\lvert 3 - p_j\\rvert = [3,\\ 2,\\ 1,\\ 0], \\qquad "
        "-m\\,\\lvert 3 - p_j\\rvert = [-1.5,\\ -1.0,\\ -0.5,\\ 0.0]\n"
    ) in text
    # without positions the rows are the positions, as before
    plain = render(derive(load_spec(builtin.example_path("alibi", "en"))), "markdown")
    assert "are their rows counted 0, 1, 2, … from the top" in plain and "p_j" not in plain
