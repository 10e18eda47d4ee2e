"""Chinese spacing: one space between Han and Latin text or maths, none next to CJK marks (issue 32's trial)."""

import re

import pytest

from symattn.checking.checker import check
from symattn.classroom import exercises as ex
from symattn.classroom import sheets
from symattn.derivation.derive import derive
from symattn.input import builtin
from symattn.input.spec import load_spec
from symattn.rendering.phrases import Phrases, load_language
from symattn.rendering.renderer import render, render_report

from .test_exercise_mla import _template

HAN = "[\u4e00-\u9fff]"
# what the trial found: a Han character touching Latin text, a space beside a CJK mark, an ASCII colon after
# Han, a space between two Han characters; maths and code spans are set apart first, and table cells' pipes
# keep their spaces
WRONG = re.compile(
    rf"{HAN}[A-Za-z0-9$]|[A-Za-z0-9$]{HAN}|[」。，：；、）] (?=[^\s|])|(?<=[^\s|]) [「（，。：；、]|{HAN}: |{HAN} {HAN}"
)


def spacing_slips(text: str) -> list[str]:
    slips = []
    for line in text.splitlines():
        prose = re.sub(r"\$\$.*?\$\$|\$[^$]*\$|`[^`]*`", "§", line)
        slips += [prose[max(0, m.start() - 8) : m.end() + 8] for m in WRONG.finditer(prose)]
    return slips


@pytest.mark.parametrize(
    "phrase, values, filled",
    [
        ("第 {n} 个头的{quantity}", {"n": 2, "quantity": "MLA 潜在向量"}, "第 2 个头的 MLA 潜在向量"),
        ("第 {n} 个头的{quantity}", {"n": 1, "quantity": "e^z"}, "第 1 个头的 e^z"),
        ("第 {n} 个头的{quantity}", {"n": 1, "quantity": "分数 S"}, "第 1 个头的分数 S"),
        ("第 {n} 个头的{quantity}", {"n": 1, "quantity": "$S$"}, "第 1 个头的 $S$"),
        ("第 {n} 个头的{quantity}", {"n": 1, "quantity": "\\(S\\)"}, "第 1 个头的 \\(S\\)"),
        ("{token} 这一行：", {"token": "「茶」"}, "「茶」这一行："),
        ("算出词元 {token} 这一行。", {"token": "「水」"}, "算出词元「水」这一行。"),
        ("{quantity} 保留 {n} 位小数", {"quantity": "输出", "n": 3}, "输出保留 3 位小数"),
        ("{quantity} 保留 {n} 位小数", {"quantity": "权重 $A$", "n": 3}, "权重 $A$ 保留 3 位小数"),
        ("维度 {dk}，分数", {"dk": "$d_k = 2$"}, "维度 $d_k = 2$，分数"),
        ("（{x}）", {"x": "RoPE"}, "（RoPE）"),
        ("共 {x} 项", {"x": "**3**"}, "共 **3** 项"),  # Markdown's marks: as the phrase spaces them
    ],
)
def test_a_chinese_phrase_spaces_its_values_by_what_they_hold(phrase, values, filled):
    assert Phrases(load_language("zh"), lambda s: s, "zh").fill(phrase, **values) == filled


def test_an_english_phrase_keeps_its_spaces():
    t = Phrases(load_language("en"), lambda s: s, "en")
    assert t.fill("{token} 这一行", token="「茶」") == "「茶」 这一行"


@pytest.mark.parametrize(
    "name",
    builtin.names(),
)
def test_every_chinese_example_is_spaced_as_chinese_is(name):
    assert spacing_slips(render(derive(load_spec(builtin.example_path(name, "zh"))), "markdown")) == []


def test_the_chinese_mla_sheet_is_spaced_as_chinese_is(tmp_path):
    tokens = {'["the", "cat", "sat"]': '["山", "高", "水"]', 'focus = "sat"': 'focus = "水"'}
    (v,) = ex.exercise(_template(tmp_path, "zh", **tokens, **{"MLA by hand": "MLA homework"}), ["s01"], 1)
    text = sheets.sheet(v)
    assert text.startswith("# 练习：MLA homework\n")
    assert "先用这些数算出 Q、K、V。走吸收路线：" in text
    assert "并把同样的数字写进 answers.toml 交回。算出词元「水」这一行。\n" in text
    assert "- 输出保留 3 位小数\n" in text
    assert spacing_slips(text) == []


def test_a_chinese_report_names_a_head_s_latin_quantity_after_a_space():
    spec = load_spec(builtin.example_path("mla-heads", "zh"))
    text = render_report(check(spec, {"claims": {"h2.absorbed_query[1][1]": "0"}}), "text")
    assert "第 2 个头的 MLA 吸收后的查询（猫，第 1 列）" in text
    assert text.startswith("手算结果核对：")
