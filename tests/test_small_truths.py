"""Small truths in issue 32's texts that users noticed: one column is "1 column", two heads need no ellipsis,
a one-key block names its key, RoPE's frequency counts t as its subscripts do, a backward head names dO, the
zh recap and the tiled slides fit their lines, and `check` says what its table shows."""

import re

import pytest

from symattn.cli.commands import main
from symattn.derivation.derive import derive
from symattn.input.spec import load_spec
from symattn.rendering.beamer import render_beamer
from symattn.rendering.renderer import render

MLA_ONE_NOPE = {  # d_nope = 1: one latent column before the decoupled d_r = 2
    "X": [["1", "0", "1"], ["0", "1", "1"], ["1", "1", "0"]],
    "W_DKV": [["1", "0"], ["0", "1"], ["0.5", "0.5"]],
    "W_UK": [["1"], ["1"]],
    "W_UV": [["1", "0"], ["0", "2"]],
    "W_Q": [["1"], ["0"], ["0"]],
    "W_QR": [["1", "0"], ["0", "1"], ["0", "0"]],
    "W_KR": [["0", "1"], ["1", "0"], ["0", "0"]],
}


def _markdown(data: dict) -> str:
    return render(derive(load_spec(data)), "markdown")


@pytest.mark.parametrize(
    "lang, phrases",
    [
        (
            "en",
            (
                "of the whole query-key width: $d_{nope} = 1$ column from the latent and $d_r = 2$ decoupled ones.",
                "($d_r = 2$, MLA's position dims; 1 column comes before them from the latent);",
            ),
        ),
        (
            "zh",
            (
                "：$d_{nope} = 1$ 列来自潜在向量，$d_r = 2$ 列是解耦维度。",
                "（$d_r = 2$，MLA 的位置维度；前面的 1 列来自潜在向量）",
            ),
        ),
    ],
)
def test_one_latent_column_is_one_column(lang, phrases):
    text = _markdown({"tokens": ["a", "b", "c"], "rope": True, "mla": MLA_ONE_NOPE, "lang": lang})
    for phrase in phrases:
        assert text.count(phrase) == 1, phrase
    assert "1 columns" not in text


@pytest.mark.parametrize(
    "heads, concat",
    [
        (2, "\\mathrm{Concat}(\\mathrm{head}_1, \\mathrm{head}_{2})="),
        (3, "\\mathrm{Concat}(\\mathrm{head}_1, \\mathrm{head}_{2}, \\mathrm{head}_{3})="),
        (4, "\\mathrm{Concat}(\\mathrm{head}_1, \\ldots, \\mathrm{head}_{4})="),
    ],
)
def test_concat_elides_heads_only_when_some_are_left_out(heads, concat):
    rows = [["1"] * (2 * heads)] * 2
    text = _markdown({"tokens": ["a", "b"], "Q": rows, "K": rows, "V": rows, "heads": heads})
    assert [line[: len(concat)] for line in text.splitlines() if "\\mathrm{Concat}" in line] == [concat]


def test_one_head_with_w_o_has_no_concat(seed):
    text = _markdown({**seed, "W_O": [["1", "0"], ["0", "1"]]})
    assert "Concat" not in text
    assert text.count("\n## Output projection $\\mathrm{head}_1\\,W_O$\n") == 1


FLASH3 = {  # 4 keys in blocks of 3: block 2 holds key 4 alone
    "tokens": ["I", "like", "green", "tea"],
    "scale": 1,
    "Q": [["1", "0"], ["0", "1"], ["1", "1"], ["0.5", "-1"]],
    "K": [["1", "0"], ["0", "2"], ["2", "0"], ["1", "1"]],
    "V": [["1", "0"], ["0", "1"], ["1", "1"], ["2", "0"]],
    "block_keys": 3,
}


@pytest.mark.parametrize(
    "lang, blocks",
    [("en", ["Block 1 (keys 1 to 3):", "Block 2 (key 4):"]), ("zh", ["第 1 块（键 1 到 3）：", "第 2 块（键 4）："])],
)
def test_a_block_of_one_key_names_its_key(lang, blocks):
    d = derive(load_spec({**FLASH3, "lang": lang}))
    text = render(d, "markdown")
    assert [line for line in text.splitlines() if line.startswith(("Block ", "第 "))] == blocks
    tex = render_beamer(d)
    assert re.findall(r"\\framesubtitle\{(.*)\}", tex) == blocks


ROWS = [["1", "0", "0", "1"], ["0", "1", "1", "0"], ["1", "1", "0", "0"]]
ROPE = {"tokens": ["a", "b", "c"], "Q": ROWS, "K": ROWS, "V": ROWS, "rope": True}


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize(
    "keys, formula, pairs",
    [
        ({}, "\\theta_t = 10000^{-2(t-1)/d_k} = 10000^{-(t-1)/2},\\ t = 1, 2", "(t,\\ t + d_k/2)"),
        (
            {"rope_style": "interleaved"},
            "\\theta_t = 10000^{-2(t-1)/d_k} = 10000^{-(t-1)/2},\\ t = 1, 2",
            "(2t - 1,\\ 2t)",
        ),
        (
            {"rope_frequencies": ["30deg", "pi/4"]},
            "\\theta_{1} = \\frac{\\pi}{6},\\ \\theta_{2} = \\frac{\\pi}{4}",
            None,
        ),
    ],
)
def test_rope_counts_pairs_from_one_as_its_subscripts_do(lang, keys, formula, pairs):
    text = _markdown({**ROPE, **keys, "lang": lang})
    assert text.count(f"${formula}$") == 1
    if pairs:
        assert text.count(f"${pairs}$") == 1
    interleaved = keys.get("rope_style") == "interleaved"
    # pair 1 turns the focus row's columns 1 and 3 (half) or 1 and 2 (interleaved): t = 1 on both
    second = "2" if interleaved else "3"
    assert "&t = 1:\\ \\varphi = 2 \\cdot \\theta_{1} = " in text
    assert f"&\\quad q'_{{1}} = q_{{1}}\\cos\\varphi - q_{{{second}}}\\sin\\varphi \\\\" in text
    assert "t = 0" not in text and "\\theta_0" not in text and "-2t/" not in text


QK = [["1", "0", "0", "1"], ["0", "1", "1", "0"], ["1", "1", "0", "0"]]
HEADS = {"tokens": ["a", "b", "c"], "Q": QK, "K": QK, "V": [["1", "0"], ["0", "2"], ["1", "1"]], "heads": 2}


@pytest.mark.parametrize(
    "keys, lines",
    [
        (  # d_v = 1 ≠ d_k = 2: one column of dO each
            {},
            ["## Head 1 backward: column 1 of $dO$", "This head's slice of $dO$:"]
            + ["## Head 2 backward: column 2 of $dO$", "This head's slice of $dO$:"],
        ),
        (
            {"W_O": [["1", "0"], ["0", "1"]]},
            ["## Head 1 backward: column 1 of $dC$", "This head's slice of $dC$:"]
            + ["## Head 2 backward: column 2 of $dC$", "This head's slice of $dC$:"],
        ),
        (
            {"V": QK, "lang": "zh"},
            ["## 头 1 的反向：$dO$ 的第 1–2 列", "这个头在 $dO$ 中的一段："]
            + ["## 头 2 的反向：$dO$ 的第 3–4 列", "这个头在 $dO$ 中的一段："],
        ),
    ],
)
def test_a_backward_head_names_the_matrix_whose_columns_it_takes(keys, lines):
    text = _markdown({**HEADS, "backward": {"loss": "sum"}, **keys})
    said = re.compile(r"## Head \d+ backward|## 头 \d+ 的反向|This head's|这个头")
    assert [line for line in text.splitlines() if said.match(line)] == lines


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_backward_heads_headings_compile_numbered(latex, tmp_path, lang):
    spec = load_spec({**HEADS, "backward": {"loss": "sum"}, "lang": lang}).with_options(numbered=True)
    tex = render(derive(spec), "latex", standalone=True)
    assert tex.count("\\texorpdfstring{" + ("Head 1 backward: column 1 of " if lang == "en" else "头 1 的反向：")) == 1
    latex(tex, "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert re.findall(r"Overfull \\[hv]box", log) == []


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_recap_breaks_a_long_value_row_without_an_overfull_box(latex, tmp_path, lang):
    # V rows of 8 entries of 9 decimals: the × V item's vector breaks over lines, ragged rather than overfull
    V = [[f"-{(i * 7 + j * 3) % 9 + 1}.12345678{j}" for j in range(8)] for i in range(3)]
    Q = [["1", "0"], ["0", "1"], ["1", "1"]]
    spec = load_spec({"tokens": ["a", "b", "c"], "Q": Q, "K": Q, "V": V, "lang": lang})
    tex = render(derive(spec), "latex", standalone=True)
    item = "\\item \\raggedright \\(\\times V\\)" + (": 50\\% " if lang == "en" else "：50\\% ")
    assert tex.count(item + "\\ensuremath{\\times} \\([-6.123456780,\\allowbreak\\ -9.123456781,") == 1
    latex(tex, "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert re.findall(r"Overfull \\[hv]box", log) == []


def _tiled8(lang: str) -> dict:
    # 8 tokens, d = 4, blocks of 3 keys: the accumulators' entries are wide (-5.027, 8.925, …)
    def rows(shift: int, scale: float) -> list[list[str]]:
        return [[str(((i * 7 + j * 3 + shift) % 9 - 4) * scale) for j in range(4)] for i in range(8)]

    tokens = [f"tok{i}" for i in range(8)]
    return {"lang": lang, "tokens": tokens, "Q": rows(0, 0.25), "K": rows(1, 0.25), "V": rows(2, 2.5), "block_keys": 3}


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_wide_accumulator_and_a_long_sum_continue_on_the_next_line_of_their_slides(latex, tmp_path, lang):
    tex = render_beamer(derive(load_spec(_tiled8(lang))))
    assert (
        tex.count(
            "\\mathrm{acc}_{2} &\\approx 0.430 \\cdot \\begin{bmatrix}-7.5 & -7.5 & 15 & -7.5\\end{bmatrix} + "
            "\\textstyle\\sum_{j=4}^{6} e^{z_j - m_{2}}\\, V_j \\\\\n"
            "&\\approx \\begin{bmatrix}-5.027 & 8.925 & 0.376 & -5.027\\end{bmatrix}\n"
        )
        == 1
    )
    # and the weighted sum, too long for its frame, continues term by term rather than cutting a vector
    assert tex.count("\n&\\quad + [-0.704,\\ 0,\\ 0.704,\\ -0.704] \\\\\n&\\quad + [0.939,\\ -0.469,") == 1
    step4 = tex.split("\\frametitle{" + ("Step 4:" if lang == "en" else "步骤 4："), 1)[1]
    assert "\\end{bmatrix}_{\\text{" not in step4  # no matrix of the weighted sum or the tiles cut into blocks
    latex(tex, "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert re.findall(r"Overfull \\[hv]box", log) == []


TIE = """tokens = ["a", "b", "c"]
heads = 2
Q = [["1", "0", "1", "0"], ["0", "1", "0", "1"], ["1", "1", "1", "1"]]
K = [["1", "0", "1", "0"], ["0", "2", "0", "2"], ["1", "1", "1", "1"]]
V = [["1", "1.125"], ["0", "0.125"], ["2", "2.125"]]  # head 2's values are head 1's + 0.125
W_O = [["1"], ["-1"]]  # so the output is exactly -0.125, a tie at 2 decimals that SymPy does not prove

[claims]
"output[1][1]" = "{claim}"
"""


@pytest.mark.parametrize(
    "claim, code, err",
    [
        (
            "-0.13",
            2,
            "symattn: {path}: claims.output[1][1]: cannot decide the rounding of output[1][1]: it may be an exact "
            "tie; more decimals in the claim settle it\n",
        ),
        ("-0.125", 0, ""),
    ],
)
def test_an_undecided_tie_says_that_more_decimals_settle_it(tmp_path, capsys, claim, code, err):
    path = tmp_path / "tie.toml"
    path.write_text(TIE.replace("{claim}", claim), encoding="utf-8")
    assert main(["check", str(path)]) == code
    assert capsys.readouterr().err == err.replace("{path}", str(path))


def _terms_report(claims: dict, lang: str = "en") -> str:
    from symattn.checking.checker import check
    from symattn.rendering.renderer import render_report

    from .conftest import SEED

    spec = load_spec({**SEED, "lang": lang})
    return render_report(check(spec, {"claims": claims, "decimals": {"scores": 3}}), "text")


def test_a_too_coarse_sum_of_the_claimants_terms_is_explained_by_their_terms():
    # 0.8 (for 0.9×1.0) + 0.02 = 0.82: carried from their terms, with 2 decimals where 3 are asked
    text = _terms_report({"products": {"scores[3][1]": ["0.8", "0.02"]}, "scores[3][1]": "0.82"})
    assert (
        "  score S (它, 小猫): 0.82 — too coarse (carried from your terms) (3 decimal places asked)\n"
        "    0.8 + 0.02 = 0.82; correctly rounded: 0.920; from your own earlier numbers: 0.820\n"
    ) in text
    assert "0.9×1.0 + 0.1×0.2" not in text  # the exact value's explanation is not theirs
    # nothing is carried after it: the summary does not say that later numbers are counted as carried
    assert (
        "  The chain lost its precision at score S (它, 小猫): 0.82 has fewer decimals than the 3 decimal places "
        "asked.\n"
    ) in text


def test_the_summary_counts_as_carried_only_what_follows_the_lost_precision():
    lost = "精度在分数 S（它，小猫）处丢失：0.9 的小数位数少于要求的 3 位"
    # 0.636 = 0.9/√2 and 1.889 = e^0.636, carried from the coarse 0.9
    zh = _terms_report({"scores[3][1]": "0.9", "scaled[3][1]": "0.636", "exp[3][1]": "1.889"}, "zh")
    assert f"  {lost}；此后由它推出的数记为沿用。\n" in zh
    assert f"  {lost}。\n" in _terms_report({"scores[3][1]": "0.9"}, "zh")


@pytest.mark.parametrize(
    "lang, line", [("en", "All of $dC$ goes back to the one head."), ("zh", "$dC$ 整个回到唯一的头。")]
)
def test_one_head_with_w_o_sends_all_of_dc_back_to_it(seed, lang, line):
    text = _markdown({**seed, "W_O": [["1", "0"], ["0", "1"]], "backward": {"loss": "sum"}, "lang": lang})
    assert text.count(f"\n{line}\n") == 1
    assert "1 heads" not in text and "分回 1 个头" not in text


def test_a_block_of_one_key_adds_its_one_term_without_a_sum():
    d = derive(load_spec(FLASH3))
    lines = [line for line in render(d, "markdown").splitlines() if "z_{4}" in line or "sum_{j=4}" in line]
    assert lines == [
        r"l \approx 1 \cdot 1.656 + e^{z_{4} - m} \approx 1.879, \qquad \mathrm{acc} \approx"
        r" \begin{bmatrix}2.053 & 1.050\end{bmatrix}"
    ]
    frames = [line for line in render_beamer(d).splitlines() if "z_{4}" in line or "sum_{j=4}" in line]
    assert frames == [
        r"m_{2} &= \max\bigl(m_{1},\ z_{4}\bigr) = 1 \\",  # its one score, not max_j z_j
        r"l_{2} &\approx 1 \cdot 1.656 + e^{z_{4} - m_{2}} \approx 1.879 \\",
        r"\mathrm{acc}_{2} &\approx 1 \cdot \begin{bmatrix}1.607 & 1.050\end{bmatrix} + e^{z_{4} - m_{2}}\, V_{4}"
        r" \approx \begin{bmatrix}2.053 & 1.050\end{bmatrix}",
    ]


@pytest.mark.parametrize(
    "lang, kv_heads, headings",
    [
        ("en", None, ["## Head 1: column 1 of Q, K and V", "## Head 2: column 2 of Q, K and V"]),
        ("zh", None, ["## 第 1 个头：Q、K、V 的第 1 列", "## 第 2 个头：Q、K、V 的第 2 列"]),
        (
            "en",
            1,
            ["## Head 1: column 1 of Q, with key/value head 1", "## Head 2: column 2 of Q, with key/value head 1"],
        ),
        ("zh", 1, ["## 第 1 个头：Q 的第 1 列，用第 1 个键/值头", "## 第 2 个头：Q 的第 2 列，用第 1 个键/值头"]),
    ],
)
def test_a_head_of_one_column_says_column(lang, kv_heads, headings):
    spec = {"lang": lang, "tokens": ["a", "b"], "Q": [["1", "0"], ["0", "1"]], "heads": 2}
    width = 1 if kv_heads else 2
    spec |= {"K": [["1", "0"][:width], ["0", "1"][:width]], "V": [["1", "2"][:width], ["3", "4"][:width]]}
    if kv_heads:
        spec["kv_heads"] = kv_heads
    text = render(derive(load_spec(spec)), "markdown")
    assert [line for line in text.splitlines() if line.startswith(("## Head", "## 第"))] == headings
