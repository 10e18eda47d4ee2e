"""Issue 20 (modA): grouped-query heads (kv_heads), the sliding window and the causal alignment, read,
derived, computed and checked (the torch oracles are in test_torch_masks.py)."""

from __future__ import annotations

import json
import shutil

import pytest

from symattn.checking.checker import check
from symattn.cli.commands import main
from symattn.derivation.derive import derive
from symattn.derivation.intermediates import compute
from symattn.input import builtin
from symattn.input.errors import ShapeError, SpecError
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render

GROUPED = {"Q": [[1, 0, 0, 1]] * 3, "K": [[1, 0], [0, 1], [1, 1]], "V": [[1, 2], [3, 4], [5, 6]], "heads": 2}
PROJECTED = {"X": [[1, 0, 0, 1]] * 3, "W_Q": [[1, 0, 0, 0]] * 4, "W_K": [[1, 0]] * 4, "W_V": [[1, 0]] * 4, "heads": 2}
THREE = {"Q": [[1]] * 3, "K": [[1]] * 3, "V": [[1]] * 3}
CROSS = {"Q": [[1]] * 2, "K": [[1]] * 3, "V": [[1]] * 3}

BAD = [
    ({**GROUPED, "kv_heads": 0}, SpecError, "<dict>: kv_heads: expected an integer from 1 to 16, got 0"),
    ({**GROUPED, "kv_heads": "two"}, SpecError, "<dict>: kv_heads: expected an integer from 1 to 16, got 'two'"),
    ({**GROUPED, "kv_heads": 17}, SpecError, "<dict>: kv_heads: expected an integer from 1 to 16, got 17"),
    (
        {**GROUPED, "heads": 3, "kv_heads": 2, "Q": [[1] * 6] * 3},
        SpecError,
        "<dict>: kv_heads: 2 key/value heads do not divide heads = 3; each group needs as many query heads",
    ),
    (
        {**GROUPED, "kv_heads": 1, "K": [[1, 0, 1]] * 3},
        SpecError,
        "<dict>: K: K has 3 columns; kv_heads = 1 key/value heads of d_k = 2 need 2",
    ),
    (
        {**GROUPED, "heads": 4, "kv_heads": 2, "Q": [[1] * 8] * 3, "K": [[1] * 4] * 3, "V": [[1] * 3] * 3},
        SpecError,
        "<dict>: kv_heads: V has 3 columns, not divisible by kv_heads = 2",
    ),
    (
        {**PROJECTED, "kv_heads": 1, "W_K": [[1, 0, 0, 0]] * 4},
        ShapeError,
        "<dict>: W_K: shape mismatch: W_K is 4×4; with heads it must be d_model × (kv_heads · d_model / heads) = 4×2",
    ),
    (
        {"Q": [[1]] * 3, "K": [[1]] * 2, "V": [[1]] * 2, "mask": "causal", "causal_align": "bottom-right"},
        SpecError,
        "<dict>: causal_align: row 1 (t1) may attend to no key (causal_align = 'bottom-right' puts its diagonal "
        "before the first key); softmax is undefined there",
    ),
    (
        {**CROSS, "causal_align": "bottom-right"},
        SpecError,
        '<dict>: causal_align: only with mask = "causal" or a window: it places their diagonal',
    ),
    (
        {**CROSS, "mask": "causal", "causal_align": "diagonal"},
        SpecError,
        "<dict>: causal_align: expected one of 'top-left', 'bottom-right', got 'diagonal'",
    ),
    ({**CROSS, "window": 0}, SpecError, "<dict>: window: expected an integer from 1 to 2147483647 (keys), got 0"),
    ({**CROSS, "window": 1.5}, SpecError, "<dict>: window: expected an integer from 1 to 2147483647 (keys), got 1.5"),
    ({**CROSS, "window": True}, SpecError, "<dict>: window: expected an integer from 1 to 2147483647 (keys), got true"),
    (
        {**CROSS, "window": 2**31},
        SpecError,
        "<dict>: window: expected an integer from 1 to 2147483647 (keys), got 2147483648",
    ),
    (
        {"Q": [[1]] * 5, "K": [[1]] * 2, "V": [[1]] * 2, "window": 1},
        SpecError,
        "<dict>: window: row 3 (t3) may attend to no key (window = 1 ends at key 3, past the last key 2); "
        "softmax is undefined there",
    ),
    (  # padding empties the row: the existing rule, blamed on the mask
        {**THREE, "window": 1, "key_padding": [False, True, False]},
        SpecError,
        "<dict>: mask: row 2 (t2) may attend to no key; softmax is undefined there",
    ),
]


@pytest.mark.parametrize("raw, kind, message", BAD)
def test_bad_modern_masks_and_groups(raw, kind, message):
    with pytest.raises(kind) as info:
        load_spec(raw)
    assert str(info.value) == message


def allowed(raw):
    spec = load_spec(raw)
    n, m = len(spec.tokens), len(spec.keys)
    return [[int(spec.allowed is None or spec.allowed[i][j]) for j in range(m)] for i in range(n)]


@pytest.mark.parametrize(
    "raw, rows",
    [
        # the window alone is causal: i − w < j ≤ i
        ({**THREE, "window": 2}, [[1, 0, 0], [1, 1, 0], [0, 1, 1]]),
        ({**THREE, "window": 1}, [[1, 0, 0], [0, 1, 0], [0, 0, 1]]),
        # a window of the keys or more: no window, only its diagonal
        ({**THREE, "window": 3}, [[1, 0, 0], [1, 1, 0], [1, 1, 1]]),
        ({**THREE, "window": 9, "mask": "causal"}, [[1, 0, 0], [1, 1, 0], [1, 1, 1]]),
        # ANDed with a mask matrix and with padding
        ({**THREE, "window": 2, "mask": [[1, 1, 1], [0, 1, 1], [1, 0, 1]]}, [[1, 0, 0], [0, 1, 0], [0, 0, 1]]),
        ({**THREE, "window": 2, "key_padding": [False, True, False]}, [[1, 0, 0], [1, 0, 0], [0, 0, 1]]),
        # cross-attention: top-left (torch's is_causal) and bottom-right (FlashAttention's)
        ({**CROSS, "mask": "causal"}, [[1, 0, 0], [1, 1, 0]]),
        ({**CROSS, "mask": "causal", "causal_align": "top-left"}, [[1, 0, 0], [1, 1, 0]]),
        ({**CROSS, "mask": "causal", "causal_align": "bottom-right"}, [[1, 1, 0], [1, 1, 1]]),
        ({**CROSS, "window": 2, "causal_align": "bottom-right"}, [[1, 1, 0], [0, 1, 1]]),
        ({**CROSS, "window": 1, "mask": "causal", "causal_align": "bottom-right"}, [[0, 1, 0], [0, 0, 1]]),
    ],
)
def test_the_masks_that_windows_and_alignments_make(raw, rows):
    assert allowed({**raw, "key_tokens": ["a", "b", "c"]} if len(raw["Q"]) != len(raw["K"]) else raw) == rows


def test_a_window_of_every_key_without_causal_mask_still_looks_back_only():
    spec = load_spec({**THREE, "window": 5})
    assert spec.window == 5 and spec.allowed == ((True, False, False), (True, True, False), (True, True, True))


def test_the_default_alignment_is_top_left_as_before():
    spec = load_spec({**CROSS, "mask": "causal"})
    assert spec.causal_align == "top-left" and spec.window is None


# --- the derivation -----------------------------------------------------------------------------------


def test_the_masking_step_writes_out_the_focus_rows_window():
    spec = load_spec(builtin.example_path("window", "en"))
    text = render(derive(spec), "markdown")
    assert (
        "Causal mask with its diagonal bottom-right (as FlashAttention: the last query's diagonal falls on the last key, as "
        "when decoding with a cache): with 2 queries and 5 keys, query $i$ may look only at keys up to its diagonal "
        "($j \\le i + 3$)." in text
    )
    assert (
        "Sliding window of 3 keys: query $i$ may look only at the 3 keys that end at its diagonal "
        "($i + 3 - 3 < j \\le i + 3$), as Mistral does; everything further back is blocked." in text
    )
    assert "For “the” ($i = 2$): $2 < j \\le 5$, so it may look at “sat”, “on”, “the”." in text
    assert "M=\\begin{bmatrix}0 & 1 & 1 & 1 & 0 \\\\ 0 & 0 & 1 & 1 & 1\\end{bmatrix}" in text
    assert "| the causal diagonal aligned bottom-right |" in text
    assert "| a sliding window of 3 keys |" in text


def test_a_window_without_the_causal_mask_and_a_wide_one():
    text = render(derive(load_spec({**THREE, "window": 2, "tokens": ["a", "b", "c"]})), "markdown")
    assert "No positional mask" not in text and "Causal mask" not in text
    assert "For “c” ($i = 3$): $1 < j \\le 3$, so it may look at “b”, “c”." in text
    wide = render(derive(load_spec({**THREE, "window": 4, "tokens": ["a", "b", "c"]})), "markdown")
    assert (
        "A sliding window of 4 keys spans all 3 keys, so it blocks nothing before the diagonal: query $i$ may look "
        "at keys $j \\le i$." in wide
    )
    assert "For “c” ($i = 3$): $j \\le 3$, so it may look at “a”, “b”, “c”." in wide


def test_top_left_cross_attention_says_where_its_diagonal_is():
    raw = {**CROSS, "mask": "causal", "key_tokens": ["x", "y", "z"], "tokens": ["a", "b"]}
    text = render(derive(load_spec(raw)), "markdown")
    assert "Causal mask with its diagonal top-left (as torch's is\\_causal: the first query sees the first key)" in text
    assert "For “b” ($i = 2$): $j \\le 2$, so it may look at “x”, “y”." in text


def test_the_grouped_example_says_which_key_value_head_each_query_head_uses():
    en = render(derive(load_spec(builtin.example_path("gqa", "en"))), "markdown")
    assert (
        "The 4 query heads share 2 key/value heads, 2 query heads to each, as Llama 3 and Mistral do" in en
        and "So $K$ has $2 \\cdot 2 = 4$ columns and $V$ has $2 \\cdot 2 = 4$" in en
    )
    assert "- key/value head 1: columns 1–2 of K and 1–2 of V, used by query heads 1, 2" in en
    assert "- key/value head 2: columns 3–4 of K and 3–4 of V, used by query heads 3, 4" in en
    assert "## Head 3: columns 5–6 of Q, with key/value head 2" in en
    assert "| 4 query heads sharing 2 key/value heads (grouped-query) |" in en
    zh = render(derive(load_spec(builtin.example_path("gqa", "zh"))), "markdown")
    assert "第 2 个键/值头：K 的第 3–4 列和 V 的第 3–4 列，供查询头 3、4 使用" in zh


def test_multi_query_has_its_own_row_in_the_toy_table():
    raw = {**GROUPED, "kv_heads": 1, "tokens": ["a", "b", "c"]}
    text = render(derive(load_spec(raw)), "markdown")
    assert "| 2 query heads sharing one key/value head (multi-query) |" in text


# --- the backward pass, compute and check -------------------------------------------------------------

BACKWARD = {**GROUPED, "kv_heads": 1, "tokens": ["a", "b", "c"], "backward": {"loss": "sum"}}


def test_a_shared_key_gathers_the_gradients_of_its_query_heads():
    data = compute(load_spec(BACKWARD), digits=20, exact=True)
    heads = data["backward"]["heads"]
    for name in ("dK", "dV"):
        total = data["backward"][name]["exact"]
        per_head = [h[name]["exact"] for h in heads]
        assert len(total[0]) == 2 and len(per_head) == 2
        # the exact closed forms add up (both heads see the same K and V, with their own Q)
        for i, row in enumerate(total):
            for k, value in enumerate(row):
                import sympy

                assert sympy.simplify(sympy.sympify(value) - sum(sympy.sympify(p[i][k]) for p in per_head)) == 0


def test_compute_reports_the_groups_window_and_alignment(capsys):
    raw = {**BACKWARD, "window": 2, "mask": "causal"}
    data = compute(load_spec(raw), digits=5)
    assert data["kv_heads"] == 1 and data["kv_head_of"] == [0, 0] and data["window"] == 2
    assert "causal_align" not in data  # the default, top-left
    bottom = compute(load_spec({**CROSS, "mask": "causal", "causal_align": "bottom-right"}), digits=5)
    assert bottom["causal_align"] == "bottom-right"


def test_the_backward_document_adds_each_groups_gradients():
    text = render(derive(load_spec(BACKWARD)), "markdown")
    assert "## Backward: the shared keys and values add up" in text
    assert "Key/value head 1 serves query heads 1, 2: $dK_{[1]} = dK^{(1)} + dK^{(2)}$ and " in text


def test_hand_rounding_sums_the_shown_gradients_of_a_group():
    spec = load_spec(BACKWARD).with_options(rounding="hand")
    text = render(derive(spec), "markdown")
    assert "dK_{[1]}" in text


CLAIMS = """
[claims]
"h3.scores[3][3]" = 0.5
"h3.scores[3][2]" = 0
"h3.scores[3][1]" = 0.2
"concat[3][5]" = 2.462
"concat[3][6]" = 1.53
"""


def test_check_reads_the_grouped_shapes(tmp_path):
    # head 3 takes Q columns 5–6 and K columns 3–4 (key/value head 2): for "it", Q = [0, 1] and the keys
    # [0, 1], [1, 0], [0.5, 0.5] give S = [1, 0, 0.5]; 0.2 is the score against key/value head 1's K instead
    spec = builtin.example_path("gqa", "en")
    path = tmp_path / "claims.toml"
    path.write_text(f"spec = {json.dumps(_beside(tmp_path, spec))}\n" + CLAIMS, encoding="utf-8")
    report = check(None, str(path))
    got = [(v.claim.quantity, v.head, v.claim.col, v.verdict) for v in report.results]
    assert got == [
        ("scores", 2, 0, "wrong"),
        ("scores", 2, 1, "exact"),
        ("scores", 2, 2, "exact"),
        ("concat", None, 4, "rounded"),  # 2.461842…: head 3's output, columns 5–6 of the concatenation
        ("concat", None, 5, "last-digit"),  # 1.538157… rounds to 1.54
    ]


def test_cli_refuses_a_bad_group_with_one_line(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text("heads = 3\nkv_heads = 2\nQ = [[1, 0, 1]]\nK = [[1, 0]]\nV = [[1, 0]]\n", encoding="utf-8")
    assert main(["compute", str(path)]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"symattn: {path}: kv_heads: 2 key/value heads do not divide heads = 3; each group needs as many query heads\n"
    )


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_grouped_backward_document_passes_katex_and_tex(katex, latex, tmp_path, lang):
    raw = {**BACKWARD, "mask": "causal", "window": 2, "lang": lang}
    spec = load_spec(raw).with_options(rounding="hand")
    assert katex(render(derive(spec), "markdown")) == []
    latex(render(derive(spec), "latex", standalone=True), "xelatex" if lang == "zh" else "pdflatex", tmp_path)


def test_check_sums_a_claimants_own_head_gradients_into_the_shared_dK(tmp_path):
    # both query heads use the one K: dK = dK^(1) + dK^(2), from the claimant's own per-head numbers
    claims = {
        "claims": {
            "h1.dK": [[-3.404, 0], [0, 0], [3.404, 0]],
            "h2.dK": [[0, -2.019], [0, -0.692], [0, 2.711]],
            "dK": [[-3.404, -2.019], [0, -0.692], [3.404, 3.5]],
        }
    }
    report = check(load_spec(BACKWARD), claims)
    got = {(v.claim.quantity, v.head, v.claim.row, v.claim.col): v.verdict for v in report.results}
    assert got[("dK", 0, 0, 0)] == "rounded" and got[("dK", 1, 1, 1)] == "rounded"
    assert got[("dK", None, 0, 1)] == "rounded" and got[("dK", None, 1, 1)] == "rounded"
    assert got[("dK", None, 2, 1)] == "wrong"  # 2.711 from head 2; head 1 adds 0


def test_check_takes_claims_on_the_windowed_example():
    spec = load_spec(builtin.example_path("window", "en"))
    weights = [["0", "0.398", "0.280", "0.322", "0"], ["0", "0", "0.217", "0.372", "0.411"]]
    claims = {"claims": {"weights": weights, "output": [["2.17", "6.15"], ["6.40", "2.70"]]}}
    verdicts = [v.verdict for v in check(spec, claims).results]
    # the window's masked weights are exactly 0; 2.70 for 2.7052… is a slip in the last digit
    assert verdicts == ["exact"] + ["rounded"] * 3 + ["exact"] * 3 + ["rounded"] * 3 + ["rounded"] * 3 + ["last-digit"]


def test_a_wrong_shared_gradient_is_explained_as_its_heads_sum(tmp_path, capsys):
    path = tmp_path / "claims.toml"
    path.write_text(
        'heads = 2\nkv_heads = 1\ntokens = ["a", "b", "c"]\nQ = [[1, 0, 0, 1], [1, 0, 0, 1], [1, 0, 0, 1]]\n'
        "K = [[1, 0], [0, 1], [1, 1]]\nV = [[1, 2], [3, 4], [5, 6]]\n"
        '[backward]\nloss = "sum"\n[claims]\n"dK[3][2]" = 3.5\n',
        encoding="utf-8",
    )
    assert main(["check", str(path), "--lang", "en"]) == 1
    out = capsys.readouterr().out
    assert "gradient dK (c, column 2): 3.5 — wrong\n    0 + 2.71148 ≈ 2.71148; correctly rounded: 2.7" in out


def _beside(folder, spec) -> str:
    """The example spec copied beside the claims file, named as a claims file names its spec: a plain name."""
    shutil.copyfile(spec, folder / spec.name)
    return spec.name
