"""Practice mode with an [mla] table: the latent c_KV of every token, the focus row's query, then K and V (the
naive route) or the absorbed query q̃ with its scores and, at the end, u = P c_KV with o = u W_UV (the
absorbed route), judged by symattn check's checker with error carried forward. The hint API in process; the
rounds in headless Chromium against a real server, in English and in Chinese."""

from __future__ import annotations

import json

import pytest

from symattn.input import builtin
from symattn.input.files import read_table

pytest.importorskip("starlette", reason="starlette (the web extra) is needed for symattn serve")
pytest.importorskip("uvicorn", reason="uvicorn (the web extra) is needed for symattn serve")
pytest.importorskip("httpx", reason="httpx drives the API tests")

from starlette.testclient import TestClient  # noqa: E402

from symattn.web.app import create_app  # noqa: E402

from .conftest import chromium_driver  # noqa: E402
from .test_practice_blocks import _answer  # noqa: E402
from .test_serve import as_json, choose, forget, fragment, math_of, retype, wait, wait_math  # noqa: E402
from .test_serve_live import open_fresh, seed, server  # noqa: E402, F401  (server: the fixture)


def example(name: str = "mla", lang: str = "en") -> dict:
    return as_json(read_table(builtin.example_path(name, lang)))


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(hosts=("testserver",)), raise_server_exceptions=True) as c:
        yield c


def hint(client, quantity: str, claims: dict, spec: dict | None = None) -> str:
    response = client.post("/api/hint", json={"spec": spec or example(), "quantity": quantity, "claims": claims})
    assert response.status_code == 200, response.json()
    return response.json()["html"]


# the mla example: X = [[1, 0, 1], [0, 1, 1], [1, 1, 0]], W_DKV = [[1, 0], [0, 1], [0.5, 0.5]], W_UK = [[1, 0], [1, 1]],
# W_UV = [[1, 0], [0, 2]], W_Q = [[1, 0], [0, 1], [0, 0]]; the focus row "sat" (row 3)
LATENT = {"latent[1]": ["1.5", "0.5"], "latent[2]": ["0.5", "2.5"]}  # cat's second entry is wrong (1.5)


def test_the_latents_hint_is_x_times_w_dkv(client):
    assert hint(client, "latent", {}) == (
        "<p>Each entry of the latent c_KV is a token's row of X times a column of W_DKV:</p>\n"
        '<div class="math display">\\begin{aligned}\n'
        "(c_{KV})_{\\text{the},1} &amp;= 1\\times 1 + 0\\times 0 + 1\\times 0.5 \\\\\n"
        "(c_{KV})_{\\text{the},2} &amp;= 1\\times 0 + 0\\times 1 + 1\\times 0.5 \\\\\n"
        "(c_{KV})_{\\text{cat},1} &amp;= 0\\times 1 + 1\\times 0 + 1\\times 0.5 \\\\\n"
        "(c_{KV})_{\\text{cat},2} &amp;= 0\\times 0 + 1\\times 1 + 1\\times 0.5 \\\\\n"
        "(c_{KV})_{\\text{sat},1} &amp;= 1\\times 1 + 1\\times 0 + 0\\times 0.5 \\\\\n"
        "(c_{KV})_{\\text{sat},2} &amp;= 1\\times 0 + 1\\times 1 + 0\\times 0.5\n"
        "\\end{aligned}</div>\n"
    )


def test_the_hints_take_the_students_latent_query_and_keys(client):
    assert hint(client, "K", LATENT) == (
        "<p>Each key is your latent row of its token times a column of W_UK:</p>\n"
        '<div class="math display">\\begin{aligned}\n'
        "K_{\\text{the},1} &amp;= 1.5\\times 1 + 0.5\\times 1 \\\\\n"
        "K_{\\text{the},2} &amp;= 1.5\\times 0 + 0.5\\times 1 \\\\\n"
        "K_{\\text{cat},1} &amp;= 0.5\\times 1 + 2.5\\times 1 \\\\\n"
        "K_{\\text{cat},2} &amp;= 0.5\\times 0 + 2.5\\times 1 \\\\\n"
        "K_{\\text{sat},1} &amp;= \\square\\times 1 + \\square\\times 1 \\\\\n"
        "K_{\\text{sat},2} &amp;= \\square\\times 0 + \\square\\times 1\n"
        "\\end{aligned}</div>\n"
    )
    assert hint(client, "Q", {}) == (
        "<p>The query of “sat” is its row of X times each column of the query path:</p>\n"
        '<div class="math display">\\begin{aligned}\n'
        "Q_{\\text{sat},1} &amp;= 1\\times 1 + 1\\times 0 + 0\\times 0 \\\\\n"
        "Q_{\\text{sat},2} &amp;= 1\\times 0 + 1\\times 1 + 0\\times 0\n"
        "\\end{aligned}</div>\n"
    )
    keys = {"Q[3]": ["1", "1"], "K[2]": ["2", "-1.5"]}
    assert hint(client, "scores", keys) == (
        "<p>Each score of “sat” is your query times one of your keys:</p>\n"
        '<div class="math display">\\begin{aligned}\n'
        "Q_{\\text{sat}}\\cdot K_{\\text{the}} &amp;= 1\\times \\square + 1\\times \\square \\\\\n"
        "Q_{\\text{sat}}\\cdot K_{\\text{cat}} &amp;= 1\\times 2 + 1\\times \\left(-1.5\\right) \\\\\n"
        "Q_{\\text{sat}}\\cdot K_{\\text{sat}} &amp;= 1\\times \\square + 1\\times \\square\n"
        "\\end{aligned}</div>\n"
    )
    values = {"V[1]": ["1.5", "1"], "rows": {"sat": {"weights": ["0.225", "0.456", "0.320"]}}}
    assert "O_{\\text{sat},2} &amp;= \\textstyle\\sum_j A_{\\text{sat},j} V_{j,2} = " in hint(client, "output", values)
    assert "= 0.225\\times 1 + 0.456\\times \\square + 0.320\\times \\square" in hint(client, "output", values)


def test_the_absorbed_hints_fold_w_uk_into_the_query_and_w_uv_after_the_weights(client):
    claims = {**LATENT, "Q[3]": ["1", "1"], "rows": {"sat": {"absorbed_query": ["1", "2"]}}}
    assert hint(client, "absorbed", claims) == (
        "<p>Fold W_UK into your query (your q times the transpose of W_UK), then score each of your latent rows with it:</p>\n"
        '<div class="math display">\\begin{aligned}\n'
        "\\tilde{q}_{1} &amp;= 1\\times 1 + 1\\times 0 \\\\\n"
        "\\tilde{q}_{2} &amp;= 1\\times 1 + 1\\times 1 \\\\\n"
        "S_{\\text{sat},\\text{the}} &amp;= \\tilde{q}\\cdot (c_{KV})_{\\text{the}} = 1\\times 1.5 + 2\\times 0.5 \\\\\n"
        "S_{\\text{sat},\\text{cat}} &amp;= \\tilde{q}\\cdot (c_{KV})_{\\text{cat}} = 1\\times 0.5 + 2\\times 2.5 \\\\\n"
        "S_{\\text{sat},\\text{sat}} &amp;= \\tilde{q}\\cdot (c_{KV})_{\\text{sat}} = 1\\times \\square + 2\\times \\square\n"
        "\\end{aligned}</div>\n"
    )
    claims = {**LATENT, "rows": {"sat": {"weights": ["0.225", "0.456", "0.320"], "latent_output": ["0.885", ""]}}}
    assert hint(client, "absorbed_output", claims) == (
        "<p>Weight your latent rows by your weights, u = P c_KV, then multiply your u by W_UV: the naive route's "
        "P V, exactly, without ever forming V:</p>\n"
        '<div class="math display">\\begin{aligned}\n'
        "u_{1} &amp;= \\textstyle\\sum_j A_{\\text{sat},j} (c_{KV})_{j,1} = "
        "0.225\\times 1.5 + 0.456\\times 0.5 + 0.320\\times \\square \\\\\n"
        "u_{2} &amp;= \\textstyle\\sum_j A_{\\text{sat},j} (c_{KV})_{j,2} = "
        "0.225\\times 0.5 + 0.456\\times 2.5 + 0.320\\times \\square \\\\\n"
        "O_{\\text{sat},1} &amp;= \\textstyle\\sum_k u_k (W_{UV})_{k,1} = 0.885\\times 1 + \\square\\times 0 \\\\\n"
        "O_{\\text{sat},2} &amp;= \\textstyle\\sum_k u_k (W_{UV})_{k,2} = 0.885\\times 0 + \\square\\times 2\n"
        "\\end{aligned}</div>\n"
    )


def test_the_hints_in_chinese(client):
    spec = example("mla", "zh")
    claims = {"rows": {"下": {"absorbed_query": ["1", "2"]}}}
    assert hint(client, "absorbed", claims, spec).startswith(
        "<p>把 W_UK 并入你的查询（你的 q 乘 W_UK 的转置），再用它与你的每个潜在向量算分数：</p>\n"
    )
    assert hint(client, "Q", {}, spec).startswith("<p>「下」的查询是它的 X 行乘以查询投影的每一列：</p>\n")


def test_the_query_paths_two_matrices(client):
    # with W_DQ and W_UQ the query's hint goes through c_Q = x W_DQ, by its entries' names (never its values)
    spec = example()
    spec["mla"] = {**{k: v for k, v in spec["mla"].items() if k != "W_Q"}, "W_DQ": [[1], [0], [2]], "W_UQ": [[1, -1]]}
    assert hint(client, "Q", {}, spec).endswith(
        '<div class="math display">\\begin{aligned}\n'
        "(c_Q)_{\\text{sat},1} &amp;= 1\\times 1 + 1\\times 0 + 0\\times 2 \\\\\n"
        "Q_{\\text{sat},1} &amp;= (c_Q)_{\\text{sat},1}\\times 1 \\\\\n"
        "Q_{\\text{sat},2} &amp;= (c_Q)_{\\text{sat},1}\\times \\left(-1\\right)\n"
        "\\end{aligned}</div>\n"
    )


@pytest.mark.parametrize(
    "spec, quantity, message",
    [
        (seed("en"), "latent", "spec: mla: the hint of latent needs an [mla] table"),
        (seed("en"), "absorbed", "spec: mla: the hint of absorbed needs an [mla] table"),
    ],
)
def test_mla_hint_errors(client, spec, quantity, message):
    response = client.post("/api/hint", json={"spec": spec, "quantity": quantity})
    assert response.status_code == 400 and response.json()["error"] == message


def test_the_refusal_in_chinese(client):
    headers = {"accept-language": "zh-CN,zh"}
    # the turn in cross-attention without positions (with them, the keys' angles are their own)
    keys = {"key_tokens": ["x", "y"], "K": [[1, 0, 1, 0], [0, 1, 0, 1]], "V": [[1, 0], [0, 1]]}
    spec = {**example("rope", "zh"), **keys}
    response = client.post("/api/hint", json={"spec": spec, "quantity": "angle"}, headers=headers)
    assert response.json()["error"] == (
        "spec: positions: 交叉注意力中，练习模式只在规格给出 positions 时旋转 Q 和 K（否则键的角度要按查询的行来写）；"
        "请在核对页核对它们"
    )
    response = client.post("/api/hint", json={"spec": seed("zh"), "quantity": "V"}, headers=headers)
    assert response.json()["error"] == "spec: mla: V 的提示需要 [mla] 表"


def test_with_block_keys_the_output_is_acc_over_l(client):
    # MLA and the online softmax: the round ends with O = acc / l of the last block, as without MLA
    spec = {**example(), "block_keys": 2}
    claims = {"running_sum[2][3]": "1.880", "accumulator[2][3]": ["", "2.053"]}
    assert hint(client, "output", claims, spec).startswith(
        "<p>Divide your last accumulator by your last running sum, column by column:</p>\n"
        '<div class="math display">\\begin{aligned}\n'
        "O_{\\text{sat},1} &amp;= \\frac{\\mathrm{acc}_{2,1}}{l_{2}} = \\frac{\\square}{1.880} \\\\\n"
    )


# --- the rounds in Chromium ---------------------------------------------------------------------------------

BROWSERS = {"en": "en-US,en", "zh": "zh-CN,zh"}


@pytest.fixture(scope="module", params=["en", "zh"])
def page(request):
    """(driver, lang): a browser in that language."""
    driver = chromium_driver("1280,900", loopback=True, scrollbars=False, languages=BROWSERS[request.param])
    try:
        yield driver, request.param
    finally:
        driver.quit()


def _open(driver, url: str, name: str, lang: str) -> None:
    open_fresh(driver, url, seed(lang))
    examples = json.loads(driver.execute_script("return fetch('/api/examples').then(r => r.text())"))
    index = next(i for i, e in enumerate(examples) if (e["name"], e["lang"]) == (name, lang))
    choose(driver, "example", str(index))
    driver.find_element("id", "load-example").click()
    wait_math(driver, math_of(fragment(example(name, lang))), f"the {name} example")
    driver.find_element("id", "tab-practice").click()


def _text(driver, element_id: str) -> str:
    return driver.find_element("id", element_id).text


def _step(driver, text: str) -> None:
    driver.find_element("id", "practice-next").click()
    wait(driver, lambda: _text(driver, "practice-progress") == text, what=text)


def _annotations(driver, where: str) -> str:
    script = f"return Array.from(document.querySelectorAll('{where} annotation')).map(a => a.textContent).join(' ')"
    return driver.execute_script(script)


# what the page says, (English, Chinese)
WORDS = {
    "progress": (
        ["Step 1 of 8", "Step 2 of 8", "Step 3 of 8", "Step 8 of 8"],
        ["第 1 步，共 8 步", "第 2 步，共 8 步", "第 3 步，共 8 步", "第 8 步，共 8 步"],
    ),
    "latent": ("Compute the MLA latent c_KV of every token.", "计算每个词元的 MLA 潜在向量 c_KV。"),
    "captions": (
        ["the, column 1", "the, column 2", "cat, column 1", "cat, column 2", "sat, column 1", "sat, column 2"],
        ["猫，第 1 列", "猫，第 2 列", "坐，第 1 列", "坐，第 2 列", "下，第 1 列", "下，第 2 列"],
    ),
    "wrong": ("✘\nwrong", "✘\n错误"),
    "Q": ("Compute the query Q of “sat”.", "计算「下」的查询 Q。"),
    "absorbed": (
        "Compute the absorbed query of “sat” (its q times the transpose of W_UK), then its score against each latent "
        "row c_KV.",
        "计算「下」吸收后的查询（q 乘 W_UK 的转置），再算它与每个潜在向量 c_KV 的分数。",
    ),
    "absorbed_captions": (
        ["absorbed query, column 1", "absorbed query, column 2", "the", "cat", "sat"],
        ["吸收后的查询，第 1 列", "吸收后的查询，第 2 列", "猫", "坐", "下"],
    ),
    "output": (
        "Compute u = P c_KV of “sat”, then its output o = u W_UV.",
        "计算「下」的 u = P c_KV，再算它的输出 o = u W_UV。",
    ),
    "output_captions": (
        ["u, column 1", "u, column 2", "o, column 1", "o, column 2"],
        ["u 第 1 列", "u 第 2 列", "o 第 1 列", "o 第 2 列"],
    ),
    "same": ("This is exactly the output of the weighted sum above", "这正是上面加权求和的输出"),
    "by_hand": ("✔\nright, from your rounded numbers", "✔\n正确，由你舍入后的数算出"),
}


def said(lang: str) -> dict:
    return {key: pair[("en", "zh").index(lang)] for key, pair in WORDS.items()}


def _captions(driver) -> list[str]:
    return [c.text for c in driver.find_elements("css selector", "#practice-boxes .caption")]


def test_the_absorbed_round_carries_a_wrong_latent_forward(page, server):
    driver, lang = page
    words = said(lang)
    _open(driver, server, "mla", lang)
    wait(driver, lambda: _text(driver, "practice-progress") == words["progress"][0], what="8 steps")
    assert _text(driver, "practice-question") == words["latent"]
    assert _captions(driver) == words["captions"]
    # cat's second latent entry is 0·0 + 1·1 + 1·0.5 = 1.5: 2.5 is wrong
    latent = {
        "practice-latent-r1": ["1.5", "0.5"],
        "practice-latent-r2": ["0.5", "2.5"],
        "practice-latent-r3": ["1", "1"],
    }
    verdicts = {"practice-latent-r1": ["exact", "exact"], "practice-latent-r2": ["exact", "wrong"]}
    _answer(driver, latent, {**verdicts, "practice-latent-r3": ["exact", "exact"]})
    assert driver.find_element("css selector", "#practice-latent-r2-1 .verdict").text == words["wrong"]
    # revealed, the MLA step stops at c_KV: the query, K, V and q̃ are later steps' answers
    driver.find_element("id", "practice-reveal").click()
    shown = wait(driver, lambda: _annotations(driver, "#practice-step"), what="the latent revealed")
    assert "c_{KV} = X W_{DKV}" in shown and "W_Q" not in shown and "W_{UK}" not in shown
    _step(driver, words["progress"][1])
    assert _text(driver, "practice-question") == words["Q"]
    _answer(driver, {"practice-Q": ["1", "1"]}, {"practice-Q": ["exact", "exact"]})
    driver.find_element("id", "practice-reveal").click()
    shown = wait(driver, lambda: _annotations(driver, "#practice-step"), what="the query revealed")
    assert "W_Q=" in shown and "W_{UK}" not in shown and "\\tilde{q}" not in shown
    _step(driver, words["progress"][2])
    assert _text(driver, "practice-question") == words["absorbed"]
    assert _captions(driver) == words["absorbed_captions"]
    # the score against cat from the student's own latent: 1 × 0.5 + 2 × 2.5 = 5.5 (exact 3.5): carried
    absorbed = {"practice-absorbed_query": ["1", "2"], "practice-scores": ["2.5", "5.5", "3"]}
    _answer(
        driver,
        absorbed,
        {"practice-absorbed_query": ["exact", "exact"], "practice-scores": ["exact", "carried", "exact"]},
    )
    assert "tone-carried" in driver.find_element("id", "practice-scores-1").get_attribute("class")
    driver.find_element("id", "practice-hint").click()
    tex = wait(driver, lambda: _annotations(driver, "#practice-hint-text"), what="the hint")
    assert "S_{\\text{" in tex and "= \\tilde{q}\\cdot (c_{KV})" in tex and "= 1\\times 0.5 + 2\\times 2.5" in tex
    driver.find_element("id", "practice-reveal").click()
    shown = wait(driver, lambda: _annotations(driver, "#practice-step"), what="the MLA step whole")
    assert "\\tilde{q}\\, c_{KV}^{\\top}" in shown and "W_{UV}=" in shown


def test_the_absorbed_output_is_u_then_u_w_uv(page, server):
    driver, lang = page
    words = said(lang)
    _open(driver, server, "mla", lang)
    wait(driver, lambda: _text(driver, "practice-progress") == words["progress"][0], what="8 steps")
    for _ in range(1, 8):
        driver.find_element("id", "practice-next").click()
    wait(driver, lambda: _text(driver, "practice-progress") == words["progress"][3], what="the last step")
    assert _text(driver, "practice-question") == words["output"]
    assert _captions(driver) == words["output_captions"]
    # u ≈ [0.885, 1.115]; o = u W_UV from the student's u: 1.115 × 2 = 2.230 (exact 2.231), right by hand
    boxes = {"practice-latent_output": ["0.885", "1.115"], "practice-output": ["0.885", "2.230"]}
    _answer(driver, boxes, {"practice-latent_output": ["rounded", "rounded"], "practice-output": ["rounded", "hand"]})
    assert driver.find_element("css selector", "#practice-output-1 .verdict").text == words["by_hand"]
    driver.find_element("id", "practice-reveal").click()
    # the absorbed route's output step: the same output as the naive route's, exactly
    revealed = wait(driver, lambda: _text(driver, "practice-step"), what="the absorbed output step")
    assert words["same"] in revealed


def test_the_naive_round_goes_through_k_and_v(page, server):
    driver, lang = page
    _open(driver, server, "mla", lang)
    choose(driver, "set-mla_route", "naive")
    raw = example("mla", lang)
    del raw["mla_route"]
    wait_math(driver, math_of(fragment(raw)), "the MLA example, naive")
    steps = {"en": "Step 1 of 10", "zh": "第 1 步，共 10 步"}[lang]
    wait(driver, lambda: _text(driver, "practice-progress") == steps, what="10 steps")
    latent = {
        "practice-latent-r1": ["1.5", "0.5"],
        "practice-latent-r2": ["0.5", "1.5"],
        "practice-latent-r3": ["1", "1"],
    }
    _answer(driver, latent, {box: ["exact", "exact"] for box in latent})
    driver.find_element("id", "practice-next").click()
    _answer(driver, {"practice-Q": ["1", "1"]}, {"practice-Q": ["exact", "exact"]})
    driver.find_element("id", "practice-next").click()
    question = {"en": "Compute the key K of every token.", "zh": "计算每个词元的键 K。"}[lang]
    wait(driver, lambda: _text(driver, "practice-question") == question, what="the keys")
    # K = c_KV W_UK: cat's second column is 0.5 × 0 + 1.5 × 1 = 1.5; 2.5 is wrong
    keys = {"practice-K-r1": ["2", "0.5"], "practice-K-r2": ["2", "2.5"], "practice-K-r3": ["2", "1"]}
    _answer(
        driver,
        keys,
        {"practice-K-r1": ["exact", "exact"], "practice-K-r2": ["exact", "wrong"], "practice-K-r3": ["exact", "exact"]},
    )
    driver.find_element("id", "practice-reveal").click()
    shown = wait(driver, lambda: _annotations(driver, "#practice-step"), what="the keys revealed")
    assert "W_{UK}=" in shown and "V=\\begin" not in shown  # V is the next step's answer
    driver.find_element("id", "practice-next").click()
    values = {"practice-V-r1": ["1.5", "1"], "practice-V-r2": ["0.5", "3"], "practice-V-r3": ["1", "2"]}
    _answer(driver, values, {box: ["exact", "exact"] for box in values})
    driver.find_element("id", "practice-next").click()
    # the score against cat from the student's own K: 1 × 2 + 1 × 2.5 = 4.5 (exact 3.5): carried
    scores = {"practice-scores": ["2.5", "4.5", "3"]}
    _answer(driver, scores, {"practice-scores": ["exact", "carried", "exact"]})
    driver.find_element("id", "practice-hint").click()
    tex = wait(driver, lambda: _annotations(driver, "#practice-hint-text"), what="the hint")
    assert "&= 1\\times 2 + 1\\times 2.5" in tex


REFUSALS = {
    # two heads of MLA: the page's boxes are one head's
    "mla-heads": {
        "en": "Practice mode works one head without W_O; check the numbers of several heads with symattn check.",
        "zh": "练习模式只练没有 W_O 的单个头；多个头的数请用 symattn check 核对。",
    },
}


@pytest.mark.parametrize("name", REFUSALS)
def test_a_refused_round_shows_no_step_and_no_buttons(page, server, name):
    driver, lang = page
    _open(driver, server, name, lang)
    wait(driver, lambda: _text(driver, "practice-error") == REFUSALS[name][lang], what="the refusal")
    assert driver.find_elements("css selector", "#practice-boxes .box") == []
    assert _text(driver, "practice-progress") == "" and _text(driver, "practice-question") == ""
    for button in ("practice-reveal", "practice-hint", "practice-next", "practice-previous"):
        assert not driver.find_element("id", button).is_enabled()
    # another example brings the round back
    examples = json.loads(driver.execute_script("return fetch('/api/examples').then(r => r.text())"))
    choose(driver, "example", str(next(i for i, e in enumerate(examples) if (e["name"], e["lang"]) == ("mla", lang))))
    driver.find_element("id", "load-example").click()
    wait(driver, lambda: driver.find_elements("id", "practice-latent-r1-0-input"), what="the MLA round")
    assert not driver.find_element("id", "practice-error").is_displayed()
    assert driver.find_element("id", "practice-hint").is_enabled()


def test_with_block_keys_the_blocks_come_after_the_absorbed_scores(page, server):
    driver, lang = page
    _open(driver, server, "mla", lang)
    retype(driver.find_element("id", "set-block_keys"), "2")
    # the latent, the query, q̃ with its scores, the scaled scores, two blocks of keys, then O = acc / l
    steps = {"en": "Step 1 of 7", "zh": "第 1 步，共 7 步"}[lang]
    wait(driver, lambda: _text(driver, "practice-progress") == steps, what="7 steps")
    for _ in range(4):
        driver.find_element("id", "practice-next").click()
    wait(driver, lambda: driver.find_elements("id", "practice-running_max-b1-0-input"), what="block 1")


def test_the_query_through_its_own_latent_is_revealed_to_q(page, server):
    import base64

    driver, lang = page
    if lang == "zh":
        pytest.skip("the reveal's cut is the same in both languages; once, in English")
    spec = example()
    spec["mla"] = {**{k: v for k, v in spec["mla"].items() if k != "W_Q"}, "W_DQ": [[1], [0], [2]], "W_UQ": [[1, -1]]}
    state = {"spec": spec, "claims": {}, "tab": "practice", "row": "focus", "practice": {"step": 1}}
    fragment_ = base64.urlsafe_b64encode(json.dumps(state).encode()).decode().rstrip("=")
    forget(driver, server)
    driver.get(f"{server}#j={fragment_}")
    wait(driver, lambda: _text(driver, "practice-progress") == "Step 2 of 8", what="the query's step")
    # q = (x W_DQ) W_UQ = (1·1 + 1·0 + 0·2) [1, −1]
    _answer(driver, {"practice-Q": ["1", "-1"]}, {"practice-Q": ["exact", "exact"]})
    driver.find_element("id", "practice-reveal").click()
    shown = wait(driver, lambda: _annotations(driver, "#practice-step"), what="the query revealed")
    assert "W_{DQ}=" in shown and "W_{UQ}=" in shown and "W_{UK}" not in shown
