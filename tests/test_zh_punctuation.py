"""Chinese check reports and practice questions punctuate as Chinese does (issue 32, the teacher's trial): full-width
（，）between Chinese words, never an ASCII ",", "(" or ")" ("(很快, 第 5 列)", "精确：6, 正确舍入：3" were)."""

from __future__ import annotations

import base64
import json
import re
import tomllib

import pytest

from symattn.checking.checker import check
from symattn.input import builtin
from symattn.input.files import read_table
from symattn.input.languages import TEMPLATE_PATHS
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render_report

from .test_serve import as_json, wait

CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


def ascii_marks(text: str) -> list[str]:
    """Each ASCII comma beside Chinese text, "(" opening onto it and ")" closing after it, in its context: math
    such as e^(z − max) 之和 keeps its brackets, whose insides are Latin."""
    found = []
    for m in re.finditer(r"[,()]", text):
        i, mark = m.start(), m.group()
        left, right = text[:i].rstrip()[-1:], text[i + 1 :].lstrip()[:1]
        sides = {",": left + right, "(": right, ")": left}[mark]
        if CJK.search(sides):
            found.append(text[max(0, i - 12) : i + 12])
    return found


def test_the_rule_finds_what_the_trials_found():
    assert ascii_marks("(很快, 第 5 列)") == ["(很快, 第 5 列)", "(很快, 第 5 列)", "(很快, 第 5 列)"]
    assert ascii_marks("精确：6, 正确舍入：3") == ["精确：6, 正确舍入：3"]
    assert ascii_marks("e^(z − max) 之和，如 0.5, 0.25（每头一个）") == []


def _phrases(node, path=""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _phrases(value, f"{path}.{key}" if path else key)
    elif isinstance(node, list):
        for k, value in enumerate(node):
            yield from _phrases(value, f"{path}[{k}]")
    elif isinstance(node, str):
        yield path, node


# what the checker and the practice page say: the report, its places, verdicts, slips and quantities, the page's
# words and the practice rounds
SECTIONS = ("report", "verdict", "slip", "quantity", "practice", "ui", "error")
# phrases that quote a spec's own TOML, whose placeholders are numbers: "window = [{left}, {right}]"
QUOTING_TOML = {"error.window_size_past": {"left": "2", "right": "-1"}}


def test_every_chinese_check_and_practice_phrase_filled_with_sample_values_punctuates_in_full_width():
    prose = tomllib.loads((TEMPLATE_PATHS[-1] / "lang" / "zh.toml").read_text(encoding="utf-8"))
    samples = iter(["「猫」", "0.5", "第 2 列", "c_KV"] * 1000)  # Chinese, a number, Chinese, Latin: every side
    checked = 0
    for section in SECTIONS:
        for path, phrase in _phrases(prose[section], section):
            numbers = QUOTING_TOML.get(path)
            filled = re.sub(
                r"\{([A-Za-z_]+)\}",
                lambda m, numbers=numbers: numbers[m.group(1)] if numbers else next(samples),
                phrase,
            )
            assert ascii_marks(filled) == [], path
            checked += 1
    assert checked > 300


def _zh_report(fmt: str) -> str:
    """A Chinese report with every kind of place and note: a head's and the layer's numbers, a block's
    (token, column), a partial product's term, a wrong, a carried and a truncated claim, a blank and a decimal
    comma."""
    heads = load_spec(builtin.example_path("mla-heads", "zh"))
    claims = {
        "h2.Q[3][3]": "9",
        "latent[2][1]": "0,5",
        "h1.scores[3][1]": "",
        "h2.absorbed_query[3]": ["3", "1"],
        "h2.weights[3][1]": "0.1",
    }
    out = render_report(check(heads, {"claims": claims}), fmt)
    flash = load_spec(builtin.example_path("flash", "zh"))
    tiled = {"accumulator[2][4][1]": "9", "running_max[1][4]": "0.5", "products.scores[4][1]": ["0.3", "0"]}
    return out + render_report(check(flash, {"claims": tiled}), fmt)


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_chinese_check_reports_punctuate_in_full_width(fmt):
    text = _zh_report(fmt)
    prose = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", "", text, flags=re.S)  # the math between $ is not prose
    assert ascii_marks(prose) == []
    assert (
        "第 2 个头的查询 Q（下，第 3 列）" if fmt == "text" else "**第 2 个头的查询 $Q$（下，第 3 列）**：9——错误"
    ) in text


def test_a_chinese_text_report_in_full():
    text = _zh_report("text")
    assert "  第 2 个头的查询 Q（下，第 3 列）：9——错误\n    1×0 + 1×1 + 0×1 = 1；正确舍入：1\n" in text
    assert (
        "  精确：2、正确舍入：0、沿用前面的数：0、末位差一：0、错误：3、空白（未核对）：1、1 个数用了小数逗号" in text
    )
    assert "累加器 acc（第 2 块，茶，第 1 列）" in text
    assert "S 的部分积（茶，我，第 1 项）" in text


def test_a_chinese_block_question_lists_its_keys_with_the_enumeration_comma(chrome, server):
    chinese = chrome  # a Chinese browser (tests/test_serve.py)
    from .test_serve_live import forget

    spec = as_json(read_table(builtin.example_path("flash", "zh")))  # blocks of 2 keys: 我 and 喜欢 first
    spec.pop("split_keys", None)
    state = {"spec": spec, "claims": {}, "tab": "practice", "row": "focus", "practice": {"step": 2}}
    forget(chinese, server)
    chinese.get(f"{server}#j=" + base64.urlsafe_b64encode(json.dumps(state).encode()).decode().rstrip("="))
    question = wait(
        chinese,
        lambda: (lambda text: text if text.startswith("第 1 块") else None)(
            chinese.find_element("id", "practice-question").text
        ),
        what="block 1",
    )
    assert question.startswith("第 1 块（键「我」、「喜欢」）：")
    assert ascii_marks(question) == []


from .test_serve import chrome, downloads  # noqa: E402, F401  (a Chinese browser, fixtures)
from .test_serve_live import server  # noqa: E402, F401  (the page, a fixture)
