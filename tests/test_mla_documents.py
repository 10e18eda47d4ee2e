"""MLA's documents say the truth about their columns and steps (issue 32): a head whose V is narrower or wider
than its Q and K names V's own columns, MLA with RoPE numbers its two steps before step 1 as 0.1 and 0.2, and
the absorbed route's lines break where numbers are wide, so TeX sets them with no overfull box."""

import re

import pytest

from symattn.derivation.derive import derive
from symattn.input import builtin
from symattn.input.spec import load_spec
from symattn.rendering.beamer import render_beamer
from symattn.rendering.deck import frames
from symattn.rendering.renderer import render

from .test_mla_rope import TWO, heads_without_rope  # TWO: 2 heads: d_nope 2 and d_r 2 (Q and K 4 wide each), d_v 3

HEADS_V = {
    "en": ("Head 1: columns 1–4 of Q and K, 1–3 of V", "Head 2: columns 5–8 of Q and K, 4–6 of V"),
    "zh": ("第 1 个头：Q、K 的第 1–4 列，V 的第 1–3 列", "第 2 个头：Q、K 的第 5–8 列，V 的第 4–6 列"),
}


def _two_heads(lang):
    data = {"tokens": ["a", "b", "c", "d"], "mla": TWO, "heads": 2, "rope": True, "mla_route": "absorbed"}
    return load_spec({**data, "lang": lang})


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_head_names_v_by_its_own_columns_in_every_format(lang):
    d = derive(_two_heads(lang))
    one, two = HEADS_V[lang]
    # the setup, what the heads share (the latent), then the heads
    assert [line for line in render(d, "markdown").splitlines() if line.startswith("## ")][2:4] == [
        "## " + one,
        "## " + two,
    ]
    assert render(d, "latex").count("\\subsection*{" + two + "}") == 1
    assert "\\framesubtitle{" + two + "}" in render_beamer(d)
    assert "*" + two + "*" in "\n".join(frames(d))
    assert "of Q, K and V" not in render(d, "markdown") and "Q、K、V 的" not in render(d, "markdown")


@pytest.mark.parametrize(
    "lang, heading",
    [("en", "## Head 2: columns 3–4 of Q and K, 4–6 of V"), ("zh", "## 第 2 个头：Q、K 的第 3–4 列，V 的第 4–6 列")],
)
def test_any_spec_whose_v_has_another_width_names_its_columns(lang, heading):
    Q = [["1", "0", "1", "1"], ["0", "1", "0", "2"]]
    V = [["1", "2", "3", "4", "5", "6"], ["0", "1", "0", "1", "0", "1"]]
    text = render(derive(load_spec({"tokens": ["a", "b"], "Q": Q, "K": Q, "V": V, "heads": 2, "lang": lang})))
    assert text.count(heading) == 1


@pytest.mark.parametrize(
    "lang, heading",
    [("en", "## Head 2: columns 3–4 of Q, K and V"), ("zh", "## 第 2 个头：Q、K、V 的第 3–4 列")],
)
def test_a_head_whose_v_is_as_wide_keeps_the_one_range(lang, heading):
    text = render(derive(load_spec(heads_without_rope(lang))), "markdown")
    assert text.count(heading) == 1


def test_grouped_heads_are_named_by_their_key_value_head_in_the_slides_too():
    d = derive(load_spec(builtin.example_path("gqa", "en")))
    deck = "\n".join(frames(d))
    assert "*Head 2: columns 3–4 of Q, with key/value head 1*" in deck
    assert "of Q, K and V" not in deck and "of Q, K and V" not in render_beamer(d)


STEPS = {
    "en": [
        "Step 0.1: the latent $c_{KV}$ (MLA)",
        "Step 0.2: rotate $Q, K$ by position (RoPE)",
        "Step 1: compute $Q'K'^\\top$ (the dot product of every Q with every K)",
        "Step 2: scale $S / \\sqrt{d_k}$",
        "Step 3: softmax of that row (scores become weights)",
        "Step 4: weights × values, the new vector of “sat”",
        "Step 5: the whole sentence at once (matrix form)",
    ],
    "zh": [
        "步骤 0.1：潜在向量 $c_{KV}$（MLA）",
        "步骤 0.2：按位置旋转 $Q, K$（RoPE）",
        "步骤 1：算 $Q'K'^\\top$（每个 Q 和每个 K 的点积）",
        "步骤 2：缩放 $S / \\sqrt{d_k}$",
        "步骤 3：对该行做 Softmax（变成权重）",
        "步骤 4：权重 × 值向量 V，得到「下」的新向量",
        "步骤 5：整句一次算完（矩阵形式）",
    ],
}


def _steps(text, mark="## "):
    return [line[len(mark) :] for line in text.splitlines() if re.match(re.escape(mark) + "(Step |步骤 )", line)]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_mla_with_rope_numbers_every_step_once_and_in_order(lang):
    d = derive(load_spec(builtin.example_path("mla-rope", lang)))
    assert _steps(render(d, "markdown")) == STEPS[lang]
    tex = [line for line in render(d, "latex").splitlines() if line.startswith("\\subsection*{")]
    assert [line for line in tex if re.search("Step 0|步骤 0", line)] == [
        "\\subsection*{" + s.replace("$", "\\(", 1).replace("$", "\\)", 1) + "}" for s in STEPS[lang][:2]
    ]


def test_each_head_numbers_its_own_steps_before_step_1():
    steps = _steps(render(derive(_two_heads("en")), "markdown"), "### ")
    assert [s.split(":")[0] for s in steps] == [
        "Step 0.1",
        "Step 0.2",
        "Step 1",
        "Step 2",
        "Step 3",
        "Step 4",
        "Step 5",
    ] * 2


@pytest.mark.parametrize(
    "name, heading",
    [
        ("mla", "## Step 0: the latent $c_{KV}$ (MLA)"),
        ("rope", "## Step 0: rotate $Q, K$ by position (RoPE)"),
        ("qk-norm", "## Step 0: normalize $Q, K$ (QK-norm)"),
    ],
)
def test_one_step_before_step_1_stays_step_0(name, heading):
    text = render(derive(load_spec(builtin.example_path(name, "en"))), "markdown")
    assert [s for s in _steps(text) if s.startswith("Step 0")] == [heading[3:]]


def _rows(r, c, k):
    """An r × c matrix of numbers of two decimals, -1.27 to 1.43, that differ row by row and column by column."""
    return [[f"{((i * 7 + j * k) % 19 - 9) * 0.13 + 0.2 + 0.01 * j:.2f}" for j in range(c)] for i in range(r)]


# one head, d_model 4, d_c 6, d_k 6, d_v 6, two decimals: q̃ and u have 6 entries of 4 decimals and more
WIDE = {
    "X": _rows(4, 4, 3),
    "W_DKV": _rows(4, 6, 5),
    "W_UK": _rows(6, 6, 2),
    "W_UV": _rows(6, 6, 4),
    "W_Q": _rows(4, 6, 6),
}


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_single_head_absorbed_lines_break_and_tex_sets_them(katex, latex, tmp_path, lang):
    spec = load_spec({"tokens": ["a", "b", "c", "d"], "mla": WIDE, "mla_route": "absorbed", "lang": lang})
    text = render(derive(spec), "markdown")
    assert katex(text) == []
    q = "\\begin{bmatrix}0.4359 & -0.1340 & 0.2841 & -1.2738 & -0.0900 & -0.4376\\end{bmatrix}"
    assert "\\begin{gathered}\\begin{aligned}&\\tilde{q} = " + q + " W_{UK}^{\\top}  \\\\ &=\\begin{bmatrix}" in text
    assert "\\begin{gathered}u \\approx \\begin{bmatrix}" in text
    latex(render(derive(spec), "latex", standalone=True), "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert re.findall(r"Overfull \\[hv]box", log) == []


def test_the_toy_table_gives_mla_s_d_model_as_x_s_width_not_the_heads_columns():
    # mla-heads: X is 3 wide, the two heads' Q columns 4: the table said d_model = 4
    from symattn.derivation.derive import derive
    from symattn.input.spec import load_spec
    from symattn.rendering.renderer import render

    text = render(derive(load_spec(heads_without_rope("en"))), "markdown")
    assert "| 2 heads of $d_k = 2$ ($d_{model} = 3$) | commonly 8–96 heads; $d_{model}$ in the thousands |" in text
