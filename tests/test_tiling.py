"""The online softmax (issue 32): block_keys and split_keys, the LSE, their claims and the flash example."""

import re
from fractions import Fraction

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from symattn.checking.checker import check
from symattn.derivation.derive import derive
from symattn.derivation.intermediates import compute
from symattn.exact.factory import build
from symattn.input import builtin
from symattn.input.claims import load_claims
from symattn.input.errors import SpecError
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render, render_report
from symattn.variants.tiling_head import Tiled

FLASH = {
    "tokens": ["a", "b", "c", "d"],
    "scale": 1,
    "Q": [[1, 0], [0, 1], [1, 1], [0.5, -1]],
    "K": [[1, 0], [0, 2], [2, 0], [1, 1]],
    "V": [[1, 0], [0, 1], [1, 1], [2, 0]],
    "block_keys": 2,
}


def test_compute_gives_every_block_and_the_last_accumulator_over_the_running_sum_is_the_output():
    out = compute(load_spec(FLASH), digits=6)
    # row d: z = (0.5, −2 | 1, −0.5); the max moves from 0.5 to 1 in block 2
    assert [row[3] for row in out["running_max"]["exact"]] == ["1/2", "1"]
    assert [row[3] for row in out["rescale"]["exact"]] == ["0", "exp(-1/2)"]
    assert [row[3] for row in out["running_sum"]["value"]] == ["1.08208", "1.87945"]
    assert out["accumulator"]["value"][1][3] == ["2.05279", "1.04979"]
    assert out["lse"]["value"] == ["2.62652", "2.49381", "3.21428", "1.63098"]  # mpmath: log Σ e^z
    assert out["tiled_equals_softmax"] is True
    model = build(load_spec(FLASH))
    tiled = Tiled(model, 2)
    for i in range(4):
        for c in range(2):
            ratio = tiled.exact("accumulator")[4 + i, c] / tiled.exact("running_sum")[1, i]
            assert sympy.simplify(ratio - model.output[i, c]) == 0


def test_lse_is_claimable_without_tiling_and_exact_for_a_row_of_one_key():
    spec = {**{k: v for k, v in FLASH.items() if k != "block_keys"}, "mask": "causal"}
    out = compute(load_spec(spec), digits=6)
    assert "lse" not in out  # compute writes the route only where the spec walks it
    report = check(load_spec(spec), load_claims({**spec, "claims": {"lse[1]": "1", "lse[2]": "0.97"}}))
    assert [(v.claim.key, v.verdict) for v in report.results] == [
        ("claims.lse[1]", "exact"),
        ("claims.lse[2]", "wrong"),
    ]


def _verdicts(claims):
    spec = load_spec(FLASH)
    report = check(spec, load_claims({**FLASH, "claims": claims}))
    return [(v.claim.key, v.verdict, str(v.expected), str(v.carried)) for v in report.results]


def test_running_max_and_running_sum_claims_get_right_rounded_carried_and_wrong():
    assert _verdicts(
        {
            "running_max[1][4]": "0.5",
            "running_max[2][4]": "1.0",
            "running_sum[1][4]": "1.082",
            "running_sum[2][4]": "1.95",
        }
    ) == [
        ("claims.running_max[1][4]", "exact", "0.5", "None"),
        ("claims.running_max[2][4]", "exact", "1.0", "1.0"),  # from their own m of block 1
        ("claims.running_sum[1][4]", "rounded", "1.082", "1.082"),
        ("claims.running_sum[2][4]", "wrong", "1.88", "1.88"),
    ]


def test_a_wrong_running_max_carries_into_the_running_sum():
    # m = 0.8 (wrong) in block 1: l_1 = e^(0.5 − 0.8) + e^(−2 − 0.8) = 0.802, carried
    assert _verdicts({"running_max[1][4]": "0.8", "running_sum[1][4]": "0.802"}) == [
        ("claims.running_max[1][4]", "wrong", "0.5", "None"),
        ("claims.running_sum[1][4]", "carried", "1.082", "0.802"),
    ]


def test_a_running_sum_or_lse_one_digit_off_is_judged_not_a_crash():
    # the truncation test compares the exact value with c and c + 0.1: the box's ends were read as floats
    assert _verdicts({"running_sum[1][4]": "1.2", "lse[4]": "1"}) == [
        ("claims.running_sum[1][4]", "last-digit", "1.1", "None"),
        ("claims.lse[4]", "last-digit", "2", "2"),
    ]


def test_fix_first_is_the_first_block_s_slip_not_the_lse_that_follows_the_blocks():
    # the LSE comes after the tiles it is made of (m + log l of the last block), not before the weights
    spec = load_spec({**FLASH, "rounding": "hand"})
    report = check(spec, {"claims": {"running_max[1][4]": "-0.9", "lse[4]": "1.5"}})
    assert [v.claim.quantity for v in report.results] == ["running_max", "lse"]
    assert report.first_problem.claim.quantity == "running_max"


def test_by_hand_each_block_follows_the_numbers_shown_before_it():
    # l_2 = 0.607 × 1.082 + e^0 + e^(−1.5) = 1.8799… from the shown rescale and l_1 (exactly 1.8794…)
    def focus_blocks(rounding):
        spec = load_spec({**FLASH, "focus": "d", "rounding": rounding})
        tiling = next(s for s in derive(spec, build(spec)).steps if s.kind == "tiling")
        shown = [
            (str(b.m.value), str(b.rescale.value), str(b.l.value), [str(x.value) for x in b.acc]) for b in tiling.blocks
        ]
        return shown, [str(x.value) for x in tiling.output], str(tiling.lse.value)

    assert focus_blocks("hand") == (
        [("0.500", "0", "1.082", ["1", "0.082"]), ("1", "0.607", "1.880", ["2.053", "1.050"])],
        ["1.092", "0.559"],
        "1.631",
    )
    assert focus_blocks("exact")[0][1] == ("1", "0.607", "1.879", ["2.053", "1.050"])


def test_by_hand_a_tiled_row_that_parts_from_the_weighted_sum_says_so_instead_of_calling_it_the_same():
    # by hand acc / l = 1.092, 0.559 but the weighted sum showed 1.093, 0.558 (exactly 1.0926…, 0.5585…)
    def identity(rounding, lang):
        spec = load_spec({**FLASH, "focus": "d", "rounding": rounding, "lang": lang})
        text = render(derive(spec), "markdown")
        return next(line for line in text.splitlines() if "closed forms" in line or "闭式" in line)

    assert identity("hand", "en") == (
        "Exactly, the tiled route is the softmax: the tiled values and the direct sums have the same closed forms "
        "(each difference expands to 0 once $e^{a} e^{b} = e^{a+b}$). Worked by hand, the blocks end at "
        "$[1.092,\\ 0.559]$ and the weighted sum above at $[1.093,\\ 0.558]$: each chain rounds at its own steps, "
        "so their last digits part."
    )
    assert "$[1.092,\\ 0.559]$" in identity("hand", "zh") and "$[1.093,\\ 0.558]$" in identity("hand", "zh")
    assert identity("exact", "en").startswith("This is exactly the softmax's output above:")


def test_accumulator_claims_take_three_indices_and_whole_blocks():
    verdicts = _verdicts({"accumulator[2][4]": ["2.053", "1.05"], "rescale[2][4]": "0.607"})
    assert verdicts == [
        ("claims.rescale[2][4]", "rounded", "0.607", "None"),
        ("claims.accumulator[2][4]", "rounded", "2.053", "2.053"),
        ("claims.accumulator[2][4]", "rounded", "1.05", "1.05"),
    ]


@pytest.mark.parametrize(
    "lang, places",
    [
        (
            "en",
            [
                "running max m (block 2, d)",
                "accumulator acc (block 2, d, column 1)",
                "accumulator acc (block 2, d, column 2)",
                "log-sum-exp LSE (d)",
            ],
        ),
        (
            "zh",
            [
                "运行最大值 m（第 2 块，d）",
                "累加器 acc（第 2 块，d，第 1 列）",
                "累加器 acc（第 2 块，d，第 2 列）",
                "对数求和指数 LSE（d）",
            ],
        ),
    ],
)
def test_the_report_names_a_block_s_column_and_no_quantity_with_an_article(lang, places):
    claims = {"running_max[2][4]": "1", "accumulator[2][4]": ["2.053", "1.05"], "lse[4]": "0.631"}
    report = check(load_spec({**FLASH, "lang": lang}), {"claims": claims})
    rows = render_report(report, "text").split("\n\n")[1].splitlines()[1:]
    assert [row[4 : 4 + len(place) + 1] for row, place in zip(rows, places, strict=True)] == [p + " " for p in places]
    assert report.data()["claims"][1]["col"] == ("d", 1)


@pytest.mark.parametrize(
    "lang, split, lines",
    [
        (
            "en",
            2,
            [
                "With one block of all 4 keys, the running max $m$, the running sum $l$ and the unnormalised "
                "accumulator $\\mathrm{acc}$ are taken over the whole row at once; $e^{m_{b-1} - m_b}$ rescales "
                "nothing. For “d”:",
                "Block 1 (keys 1 to 4):",
                "Part 1 (keys 1 to 2):",
                "Part 2 (keys 3 to 4):",
            ],
        ),
        (
            "en",
            4,
            ["Block 1 (keys 1 to 4):", "Part 1 (key 1):", "Part 2 (key 2):", "Part 3 (key 3):", "Part 4 (key 4):"],
        ),
        (
            "zh",
            2,
            [
                "只有一块，就是全部 4 个键：运行最大值 $m$、运行和 $l$ 和未归一化的累加器 $\\mathrm{acc}$ 一次对整行求出，"
                "$e^{m_{b-1} - m_b}$ 不必重新缩放任何东西。「d」这一行：",
                "第 1 块（键 1 到 4）：",
                "第 1 份（键 1 到 2）：",
                "第 2 份（键 3 到 4）：",
            ],
        ),
    ],
)
def test_split_keys_alone_is_one_block_and_names_the_keys_of_each_part(lang, split, lines):
    spec = {k: v for k, v in FLASH.items() if k != "block_keys"} | {"split_keys": split, "lang": lang}
    text = render(derive(load_spec(spec)), "markdown")
    said = [line for line in text.splitlines() if re.match(r"(With one|只有一块|Block|Part|第 \d+ [块份])", line)]
    assert said[-len(lines) :] == lines and len(said) == len(lines) + (split == 4)  # 4: the intro, as with 2


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"block_keys": 0}, "<dict>: block_keys: expected a whole number of keys from 1 to 4, got 0"),
        ({"block_keys": "two"}, "<dict>: block_keys: expected a whole number of keys from 1 to 4, got 'two'"),
        ({"split_keys": 5}, "<dict>: split_keys: expected a whole number of keys from 1 to 4, got 5"),
    ],
)
def test_bad_block_keys_are_one_line_errors(extra, message):
    with pytest.raises(SpecError) as info:
        load_spec({**FLASH, **extra})
    assert str(info.value) == message


def test_claims_on_the_blocks_need_block_keys():
    spec = {k: v for k, v in FLASH.items() if k != "block_keys"}
    with pytest.raises(SpecError) as info:
        load_claims({**spec, "claims": {"running_max[1][1]": "1"}})
    assert str(info.value) == "<dict>: claims.running_max[1][1]: claims on running_max need block_keys"


@given(
    st.lists(st.lists(st.integers(-3, 3), min_size=2, max_size=2), min_size=2, max_size=4),
    st.lists(st.lists(st.integers(-3, 3), min_size=2, max_size=2), min_size=2, max_size=4),
    st.integers(1, 3),
)
@settings(max_examples=25, deadline=None, derandomize=True)
def test_the_tiled_route_is_exactly_the_softmax(q, k, block):
    spec = load_spec({"Q": q, "K": k, "V": [[j, 1 - j] for j in range(len(k))], "block_keys": min(block, len(k))})
    model = build(spec)
    tiled = Tiled(model, spec.setting("block_keys").block)
    assert tiled.identity
    last = tiled.blocks - 1
    for i in range(model.n_queries):
        lse = tiled.exact("lse")[i, 0]
        assert sympy.simplify(sympy.exp(lse) - model.exp_sum[i, 0]) == 0
        for r in (tiled.rationals("running_sum")[last][i], tiled.rationals("rescale")[last][i]):
            assert r is None or isinstance(r, Fraction)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_flash_example_shows_every_block_and_the_identity(lang):
    text = render(derive(load_spec(builtin.example_path("flash", lang))), "markdown")
    assert len(re.findall(r"^(Block \d|第 \d+ 块)", text, re.M)) == 2  # blocks, not split-KV's parts
    assert ("is exactly the softmax's output above" in text) if lang == "en" else ("这正是上面 softmax 的输出" in text)


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_flash_example_passes_katex_and_compiles_without_overfull_boxes(katex, latex, tmp_path, lang):
    spec = load_spec(builtin.example_path("flash", lang))
    assert katex(render(derive(spec), "markdown")) == []
    latex(render(derive(spec), "latex", standalone=True), "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log) == []
