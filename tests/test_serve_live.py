"""symattn serve's live page beyond the form: the figures with their closed forms on hover, copy as LaTeX,
the page's language (the browser's, and every message after a switch), the examples menu in plain text,
and the variant area. The API in process, the page in headless Chromium against a real server."""

from __future__ import annotations

import json
import re

import pytest

from symattn.derivation.derive import derive
from symattn.derivation.intermediates import compute
from symattn.input import builtin
from symattn.input.files import read_table
from symattn.input.spec import spec_from_mapping
from symattn.rendering.figures import all_figures
from symattn.rendering.phrases import load_language
from symattn.rendering.renderer import render
from symattn.rendering.step_latex import step_latex
from symattn.rendering.svg import svg

pytest.importorskip("starlette", reason="starlette (the web extra) is needed for symattn serve")
pytest.importorskip("uvicorn", reason="uvicorn (the web extra) is needed for symattn serve")
pytest.importorskip("httpx", reason="httpx drives the API tests")

from starlette.testclient import TestClient  # noqa: E402

from symattn.web.app import browser_language, create_app, plain_title, variants  # noqa: E402

from .conftest import chromium_driver  # noqa: E402
from .test_serve import (  # noqa: E402
    _start,
    _stop,
    as_json,
    assert_contrast,
    assert_local,
    cell,
    choose,
    forget,
    fragment,
    math_of,
    retype,
    wait,
    wait_math,
)


def seed(lang: str) -> dict:
    return as_json(read_table(builtin.example_path("seed", lang)))


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(hosts=("testserver",)), raise_server_exceptions=True) as c:
        yield c


# --- the API and the helpers, in process ----------------------------------------------


@pytest.mark.parametrize("name", ["seed", "causal", "multihead", "backward", "symbolic"])
def test_render_carries_the_figures_and_each_steps_latex(client, name):
    raw = as_json(read_table(builtin.example_path(name, "en")))
    data = client.post("/api/render", json={"spec": raw, "latex_steps": True}).json()
    derivation = derive(spec_from_mapping(raw, "spec"))
    assert data["figures"] == [{"id": f.id, "kind": f.kind, "svg": svg(f)} for f in all_figures(derivation)]
    assert data["latex_steps"] == list(step_latex(derivation))
    assert data["step_kinds"] == [step.kind for step in derivation.steps if step.kind != "picture"]
    bad = client.post("/api/render", json={"spec": raw, "latex_steps": [1]})
    assert bad.json()["error"] == "request: latex_steps: expected true or false, got a list"
    # the LaTeX costs as much as the whole document: only when asked for
    assert "latex_steps" not in client.post("/api/render", json={"spec": raw, "compute": False}).json()
    # one per heading of the fragment, each the very text the LaTeX document holds for that step
    assert len(data["latex_steps"]) == data["html"].count("<h2>")
    document = render(derivation, "latex")
    assert all(step in document for step in data["latex_steps"])


def test_first_steps_latex():
    steps = step_latex(derive(spec_from_mapping(seed("en"), "spec")))
    assert steps[1].startswith(
        "\\subsection*{Step 1: compute \\(QK^\\top\\) (the dot product of every Q with every K)}\n"
    )
    assert "Q_{\\text{it}}\\cdot K_{\\text{cat}} &= 0.9\\times 1.0 + 0.1\\times 0.2 = 0.92" in steps[1]


@pytest.mark.parametrize(
    "title, plain",
    [
        (
            "Attention with projections: $Q = XW_Q$, $K = XW_K$, $V = XW_V$",
            "Attention with projections: Q = XW_Q, K = XW_K, V = XW_V",
        ),
        ("注意力的投影：$Q = XW_Q$，$K = XW_K$", "注意力的投影：Q = XW_Q，K = XW_K"),
        ("$\\frac{1}{\\sqrt{d_k}} QK^\\top$", "(1)/(√(d_k)) QKᵀ"),
        ("$\\alpha \\cdot \\mathbf{x}_{i+1}$", "α · x_{i+1}"),
        ("$\\text{<b>}$ & <i>", "<b> & <i>"),  # plain text: the page sets it as text, never as markup
        ("no math", "no math"),
    ],
)
def test_plain_title(title, plain):
    assert plain_title(title) == plain


@pytest.mark.parametrize(
    "header, lang",
    [
        ("zh-CN,zh;q=0.9,en;q=0.8", "zh"),
        ("zh-TW", "zh"),
        ("en-US,en;q=0.9,zh;q=0.8", "en"),
        ("fr-FR,fr;q=0.9", "en"),
        ("fr;q=1, zh-HK;q=0.5", "zh"),
        ("en;q=0.2, zh;q=0.7", "zh"),
        ("", "en"),
        ("en;q=bad, *", "en"),
        ("en;q=nan, zh;q=0.1", "zh"),
    ],
)
def test_browser_language(header, lang):
    assert browser_language(header) == lang


def test_examples_have_plain_titles(client):
    data = client.get("/api/examples").json()
    for example in data:
        assert example["plain_title"] == plain_title(example["title"]) and "$" not in example["plain_title"]
    projection = next(e for e in data if (e["name"], e["lang"]) == ("projection", "en"))
    assert projection["plain_title"] == "Attention with projections: Q = XW_Q, K = XW_K, V = XW_V"


@pytest.mark.parametrize("header, lang", [("zh-CN,zh;q=0.9", "zh"), ("en-GB,en", "en"), (None, "en")])
def test_page_opens_in_the_browsers_language(client, header, lang):
    page = client.get("/", headers={"accept-language": header} if header else {})
    ui = load_language(lang)["ui"]
    assert f"<title>{ui['page_title']}</title>" in page.text and page.headers["vary"] == "accept-language"
    boot = json.loads(re.search(r'<script id="boot" type="application/json">(.*?)</script>', page.text, re.S).group(1))
    assert boot["initial"] == seed(lang) and boot["builtin"] == {"zh": seed("zh"), "en": seed("en")}


def test_variant_area_is_built_from_its_list(client):
    page = client.get("/").text
    area = re.search(r'<fieldset class="settings variant" id="variant">(.*?)</fieldset>', page, re.S).group(1)
    assert (
        re.findall(r'data-key="([a-z_]+)"', area)
        == [v["key"] for v in variants()]
        == [
            "mask",
            "softmax",
            "heads",
            "kv_heads",
            "window",
            "causal_align",
            "alibi",
            "alibi_slopes",
            "softcap",
            "sinks",
            "rope",
            "rope_base",
            "rope_style",
            "rope_frequencies",
            "rope_cos",
            "rope_sin",
            "qk_norm",
            "qk_norm_eps",
            "block_keys",
            "split_keys",
            "positions",
            "key_positions",
            "mla_route",
        ]
    )
    assert re.findall(r'<option value="([a-z]+)" data-ui="softmax_', area) == ["plain", "stable"]


# --- the page in Chromium, as an English browser --------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process, url, _ = _start(cwd=tmp_path_factory.mktemp("serve-live"))
    try:
        yield url
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def english():
    driver = chromium_driver("1280,900", loopback=True, scrollbars=False, languages="en-US,en")
    try:
        yield driver
    finally:
        driver.quit()


def open_fresh(driver, url: str, raw: dict) -> None:
    forget(driver, url)
    driver.get(url)
    wait_math(driver, math_of(fragment(raw)), "the built-in example")


HEATMAP = """return Array.from(document.querySelectorAll('#figures .heatmap rect.cell')).map(c => [
  c.dataset.row, c.dataset.col, c.getAttribute('fill'),
  (c.querySelector('title.hover') || {textContent: null}).textContent]);"""
NUMBERS = "return Array.from(document.querySelectorAll('#figures .heatmap text.number')).map(t => t.textContent);"


def expected_numbers(raw: dict) -> list[str]:
    picture = next(f for f in all_figures(derive(spec_from_mapping(raw, "spec"))) if f.id == "weights")
    return [re.sub(r"<[^>]+>", "", m) for m in re.findall(r'<text class="number"[^>]*>(.*?)</text>', svg(picture))]


def test_heatmap_updates_and_hover_shows_the_closed_form(english, server):
    raw = seed("en")
    open_fresh(english, server, raw)
    wait(english, lambda: english.execute_script(NUMBERS) == expected_numbers(raw), what="the heatmap")
    before = english.execute_script(HEATMAP)
    assert len(before) == 9
    values = compute(spec_from_mapping(raw, "spec"), exact=True)
    # the cell of (it, cat): its closed form and value from compute, its row's sum named
    title = next(t for r, c, _, t in before if (r, c) == ("2", "0"))
    assert title == (
        f"A[it, cat] = exp(23*sqrt(2)/50)/s_3 ≈ {values['weights']['value'][2][0]}\n"
        "where s_3 = exp(19*sqrt(2)/200) + exp(3*sqrt(2)/8) + exp(23*sqrt(2)/50)"
    )
    assert values["weights"]["value"][2][0] == "0.402653153133793"
    lines = english.execute_script(
        "return Array.from(document.querySelectorAll('#figures .diagram line.weight title.hover')).map(t => t.textContent)"
    )
    assert lines[0].startswith("A[it, cat] = exp(23*sqrt(2)/50)/s_3 ≈ 0.402653153133793\n") and len(lines) == 3
    # an edit: the cells' colours and numbers change to the new derivation's
    retype(cell(english, "Q", "3,1"), "0.8")
    raw["Q"][2][0] = "0.8"
    wait_math(english, math_of(fragment(raw)), "the edit")
    wait(english, lambda: english.execute_script(NUMBERS) == expected_numbers(raw), what="the new heatmap")
    after = english.execute_script(HEATMAP)
    assert [c[2] for c in after[6:]] != [c[2] for c in before[6:]] and [c[2] for c in after[:6]] == [
        c[2] for c in before[:6]
    ]
    assert next(t for r, c, _, t in after if (r, c) == ("2", "0")).startswith("A[it, cat] = exp(41*sqrt(2)/100)/s_3 ≈ ")
    assert_local(english, server)


def test_labels_are_text_in_the_figures(english, server):
    raw = seed("en")
    open_fresh(english, server, raw)
    retype(english.find_element("id", "tokens-1"), "<b>x</b>")
    raw["tokens"][0] = "<b>x</b>"
    wait_math(english, math_of(fragment(raw)), "the new label")
    assert english.execute_script("return document.querySelectorAll('#figures b, #derivation b').length") == 0
    labels = english.execute_script(
        "return Array.from(document.querySelectorAll('#figures .heatmap text.row, #figures .heatmap text.col')).map(t => t.textContent)"
    )
    assert "<b>x</b>" in labels
    title = english.execute_script(
        'return document.querySelector(\'#figures rect.cell[data-row="2"][data-col="0"] title.hover\').textContent'
    )
    assert title.startswith("A[it, <b>x</b>] = ")


def test_opens_in_english_and_every_message_follows_the_switch(english, server):
    en, zh = load_language("en")["ui"], load_language("zh")["ui"]
    open_fresh(english, server, seed("en"))
    assert english.find_element("id", "status").text == en["updated"]
    assert english.find_element("id", "set-lang").get_attribute("value") == "en"
    options = english.execute_script(
        "return Array.from(document.querySelectorAll('#example option')).map(o => o.textContent)"
    )
    examples = [e for e in json.loads(english.execute_script("return fetch('/api/examples').then(r => r.text())"))]
    assert options == [e["plain_title"] for e in examples if e["lang"] == "en"]
    assert "Attention with projections: Q = XW_Q, K = XW_K, V = XW_V" in options
    # the menu opens on the example the page opened with, not on the first in the list
    assert english.find_element("css selector", "#example option:checked").text == seed("en")["title"]
    # load an example: the status line says so, in English; then switch: Chinese, and so is everything else
    choose(
        english, "example", str(next(i for i, e in enumerate(examples) if (e["name"], e["lang"]) == ("causal", "en")))
    )
    english.find_element("id", "load-example").click()
    causal = as_json(read_table(builtin.example_path("causal", "en")))
    wait_math(english, math_of(fragment(causal)), "the causal example")
    wait(
        english,
        lambda: (
            english.find_element("id", "status").text == en["loaded"].format(name="Causal attention: looking back only")
        ),
    )
    choose(english, "set-lang", "zh")
    zh_causal = as_json(read_table(builtin.example_path("causal", "zh")))
    wait_math(english, math_of(fragment(zh_causal)), "the Chinese causal example: its title and tokens too")
    assert [english.find_element("id", f"tokens-{i + 1}").get_attribute("value") for i in range(3)] == zh_causal[
        "tokens"
    ]
    assert english.find_element("id", "set-title").get_attribute("value") == zh_causal["title"]
    wait(english, lambda: english.find_element("id", "status").text == zh["updated"], what="the status in Chinese")
    words = english.execute_script(
        "return Array.from(document.querySelectorAll('[data-ui]')).map(n => [n.dataset.ui, n.textContent])"
    )
    assert all(text == zh[key] for key, text in words), [w for w in words if w[1] != zh[w[0]]]
    options = english.execute_script(
        "return Array.from(document.querySelectorAll('#example option')).map(o => o.textContent)"
    )
    assert options == [e["plain_title"] for e in examples if e["lang"] == "zh"]
    assert english.find_element("css selector", "#example option:checked").text == zh_causal["title"]
    assert english.find_element("css selector", "button.copy-latex").text == zh["copy_latex"]
    assert english.execute_script("return document.documentElement.lang") == "zh-CN"
    assert_contrast(english, "body")
    assert_local(english, server)


def test_copy_as_latex_puts_the_steps_latex_on_the_clipboard(english, server):
    raw = seed("en")
    open_fresh(english, server, raw)
    english.execute_cdp_cmd(
        "Browser.grantPermissions",
        {"origin": server.rstrip("/"), "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
    )
    steps = step_latex(derive(spec_from_mapping(raw, "spec")))
    buttons = english.find_elements("css selector", "#derivation button.copy-latex")
    assert len(buttons) == len(steps) == len(english.find_elements("css selector", "#derivation > h2"))
    heading = english.execute_script("return document.querySelectorAll('#derivation > h2')[1].textContent.trim()")
    assert buttons[1].get_attribute("aria-label") == f"Copy the LaTeX of: {heading}"
    for k in (1, 3):
        buttons[k].click()
        wait(
            english,
            lambda k=k: english.execute_script("return document.body.dataset.copied") == str(k),
            what="the copy",
        )
        english.set_script_timeout(10)
        copied = english.execute_async_script(
            "const done = arguments[arguments.length - 1]; navigator.clipboard.readText().then(done, e => done('ERR ' + e));"
        )
        assert copied == steps[k]
    assert english.find_element("id", "status").text == load_language("en")["ui"]["copied"]


def test_variant_softmax(english, server):
    raw = seed("en")
    open_fresh(english, server, raw)
    choose(english, "set-softmax", "stable")
    raw["softmax"] = "stable"
    wait_math(english, math_of(fragment(raw)), "the stable softmax")
    assert english.execute_script(
        "return Array.from(document.querySelectorAll('#variant [data-key]')).map(n => n.id)"
    ) == [
        "set-mask",
        "set-softmax",
        "set-heads",
        "set-kv_heads",
        "set-window",
        "set-causal_align",
        "set-alibi",
        "set-alibi_slopes",
        "set-softcap",
        "set-sinks",
        "set-rope",
        "set-rope_base",
        "set-rope_style",
        "set-rope_frequencies",
        "set-rope_cos",
        "set-rope_sin",
        "set-qk_norm",
        "set-qk_norm_eps",
        "set-block_keys",
        "set-split_keys",
        "set-positions",
        "set-key_positions",
        "set-mla_route",
    ]


def test_variant_window_and_alignment(english, server):
    raw = seed("en")
    open_fresh(english, server, raw)
    retype(english.find_element("id", "set-window"), "2")
    raw["window"] = "2"
    wait_math(english, math_of(fragment(raw)), "the sliding window")
    choose(english, "set-causal_align", "bottom-right")
    choose(english, "set-causal_align", "top-left")  # back to the default: the key leaves the spec
    retype(english.find_element("id", "set-window"), "1")
    raw["window"] = "1"
    wait_math(english, math_of(fragment(raw)), "a window of one key")


def test_variant_alibi_softcap_and_sinks(english, server):
    raw = seed("en")
    open_fresh(english, server, raw)
    choose(english, "set-alibi", "true")
    raw["alibi"] = True
    wait_math(english, math_of(fragment(raw)), "ALiBi")
    retype(english.find_element("id", "set-softcap"), "2")
    raw["softcap"] = "2"
    wait_math(english, math_of(fragment(raw)), "the soft-cap")
    retype(english.find_element("id", "set-sinks"), " 0.5 ")
    raw["sinks"] = ["0.5"]
    wait_math(english, math_of(fragment(raw)), "a sink")
    choose(english, "set-alibi", "false")
    del raw["alibi"]
    wait_math(english, math_of(fragment(raw)), "ALiBi off again")
    assert english.find_element("id", "set-sinks").get_attribute("placeholder") == "e.g. 0.5, 0.25 (one per head)"


def test_variant_rope(english, server):
    raw = seed("en")
    open_fresh(english, server, raw)
    choose(english, "set-rope", "true")
    raw["rope"] = True
    wait_math(english, math_of(fragment(raw)), "RoPE")
    choose(english, "set-rope_style", "interleaved")
    retype(english.find_element("id", "set-rope_base"), "100")
    raw["rope_style"], raw["rope_base"] = "interleaved", "100"
    wait_math(english, math_of(fragment(raw)), "RoPE interleaved, base 100")


def test_variant_rope_tables_are_sent_saved_and_restored(english, server):
    # given cos/sin tables (a row per position, a column per pair), typed "a, b; c, d"; a reload keeps them
    raw = seed("en")
    open_fresh(english, server, raw)
    choose(english, "set-rope", "true")
    retype(english.find_element("id", "set-rope_cos"), "1; 0.8 ;0.6;")
    retype(english.find_element("id", "set-rope_sin"), "0; 0.6; 0.8")
    raw.update(rope=True, rope_cos=[["1"], ["0.8"], ["0.6"]], rope_sin=[["0"], ["0.6"], ["0.8"]])
    expected = math_of(fragment(raw))
    assert any("0.8" in tex and "0.6" in tex for tex in expected)  # the tables' numbers are in the turn
    wait_math(english, expected, "RoPE from the tables")
    assert english.find_element("id", "set-rope_cos").get_attribute("placeholder") == (
        "e.g. 1, 0.5; 0.87, 0.25 (rows split by ;)"
    )
    english.refresh()
    wait_math(english, expected, "RoPE from the tables, after a reload")
    assert [english.find_element("id", f"set-{key}").get_attribute("value") for key in ("rope_cos", "rope_sin")] == [
        "1; 0.8; 0.6",
        "0; 0.6; 0.8",
    ]
    retype(english.find_element("id", "set-rope_sin"), "0; 0.6")  # a table one row short: the server's line
    error = wait(english, lambda: english.find_elements("id", "input-error"), what="the error at its field")[0]
    assert error.text == "spec: rope_sin: expected 3 rows (positions 0 to 2) of 1 (one per pair), got 2×1"
    assert english.execute_script("return arguments[0].closest('.field').querySelector('input').id", error) == (
        "set-rope_sin"
    )


# --- practice mode ------------------------------------------------------------------


HINT_ROW = {"scores": ["0.92", "", "-0.75"], "exp": ["1.9", "1.1", "1.7"], "exp_sum": "4.7"}


def hint(client, quantity: str, lang: str = "en") -> str:
    claims = {"rows": {"it" if lang == "en" else "它": HINT_ROW}}
    response = client.post("/api/hint", json={"spec": seed(lang), "quantity": quantity, "claims": claims})
    assert response.status_code == 200, response.json()
    return response.json()["html"]


def test_hint_is_the_formula_with_the_students_numbers(client):
    assert hint(client, "scaled") == (
        "<p>Divide each of your scores by the scale:</p>\n"
        '<div class="math display">\\begin{aligned}\n'
        "z_{\\text{cat}} &amp;= \\frac{s_{\\text{cat}}}{\\sqrt{2}} = \\frac{0.92}{\\sqrt{2}} \\\\\n"
        "z_{\\text{eats}} &amp;= \\frac{s_{\\text{eats}}}{\\sqrt{2}} = \\frac{\\square}{\\sqrt{2}} \\\\\n"
        "z_{\\text{it}} &amp;= \\frac{s_{\\text{it}}}{\\sqrt{2}} = \\frac{-0.75}{\\sqrt{2}}\n"
        "\\end{aligned}</div>\n"
    )
    assert "Q_{\\text{it}}\\cdot K_{\\text{cat}} &amp;= 0.9\\times 1.0 + 0.1\\times 0.2 \\\\" in hint(client, "scores")
    weights = hint(client, "weights")
    assert (
        "A_{\\text{it},\\text{eats}} &amp;= \\frac{e^{z_{\\text{eats}}}}{\\sum_j e^{z_j}} = \\frac{1.1}{4.7}" in weights
    )
    assert "\\textstyle\\sum_j e^{z_j} &amp;= 1.9 + 1.1 + 1.7" in hint(client, "exp_sum")
    assert hint(client, "exp_sum", "zh").startswith("<p>把你的指数加起来：</p>")


@pytest.mark.parametrize(
    "body, message",
    [
        (
            {"quantity": "softmax"},
            "request: quantity: expected one of 'scores', 'scaled', 'exp', 'exp_sum', 'weights', 'output', 'block', "
            "'latent', 'Q', 'K', 'V', 'absorbed', 'absorbed_output', 'angle', 'trig', 'Q_rot', 'K_rot', 'rms', "
            "'Q_norm', 'K_norm', got 'softmax'",
        ),
        (
            {"quantity": "exp", "claims": {"rows": {"it": {"scores": ["1", "os.system", "2"]}}}},
            "claims: claims.rows.it.scores[2]: not a number: 'os.system'",
        ),
        (
            {"quantity": None},
            "request: quantity: expected one of 'scores', 'scaled', 'exp', 'exp_sum', 'weights', 'output', 'block', "
            "'latent', 'Q', 'K', 'V', 'absorbed', 'absorbed_output', 'angle', 'trig', 'Q_rot', 'K_rot', 'rms', "
            "'Q_norm', 'K_norm', got null",
        ),
        ({}, "request: quantity: missing"),
        ({"quantity": "exp", "claims": None}, "claims: claims: expected a table of claims, got null"),
        ({"quantity": "exp", "x": 1}, "request: x: unknown key; expected one of block, claims, quantity, spec"),
    ],
)
def test_hint_errors(client, body, message):
    response = client.post("/api/hint", json={"spec": seed("en"), **body})
    assert response.status_code == 400 and response.json()["error"] == message


def test_hint_of_several_heads_says_why(client):
    raw = as_json(read_table(builtin.example_path("multihead", "en")))
    response = client.post("/api/hint", json={"spec": raw, "quantity": "scores"})
    assert response.json()["error"] == (
        "spec: heads: the page checks one head without W_O; use symattn check for several heads"
    )


def practice_verdicts(driver) -> dict:
    return driver.execute_script(
        "const out = {}; for (const b of document.querySelectorAll('#practice-boxes .box')) "
        "out[b.id] = b.dataset.verdict; return out;"
    )


def test_practice_reveals_the_step_only_after_the_answer(english, server):
    open_fresh(english, server, seed("en"))
    english.find_element("id", "tab-practice").click()
    question = wait(english, lambda: english.find_element("id", "practice-question").text, what="the question")
    assert question == "Compute the score S of “it”."
    assert english.find_element("id", "practice-progress").text == "Step 1 of 6"
    reveal = english.find_element("id", "practice-reveal")
    assert not reveal.is_enabled() and not english.find_element("id", "practice-step").is_displayed()
    assert english.find_element("id", "practice-wait").text == load_language("en")["ui"]["practice_wait"]
    english.find_element("id", "practice-scores-0-input").send_keys("0.92")
    english.find_element("id", "practice-scores-1-input").send_keys("0.5")
    two = {"practice-scores-0": "exact", "practice-scores-1": "wrong", "practice-scores-2": ""}
    wait(english, lambda: practice_verdicts(english) == two, what="two verdicts")
    assert not reveal.is_enabled()  # one box is still empty
    english.execute_script("arguments[0].click();", reveal)  # even a click on the disabled button shows nothing
    assert not english.find_element("id", "practice-step").is_displayed()
    english.find_element("id", "practice-scores-2-input").send_keys("0.75")
    wait(english, lambda: reveal.is_enabled(), what="the reveal button")
    assert english.find_element("css selector", "#practice-scores-1 .verdict").text == "✘\nwrong"
    reveal.click()
    assert english.find_element("id", "practice-step").is_displayed()
    # the revealed step is the derivation's own scores step
    assert english.execute_script(
        "const d = document.querySelectorAll('#derivation > h2')[1].textContent;"
        "return document.querySelector('#practice-step > h2').textContent === d && d.startsWith('Step 1: compute');"
    )
    assert_contrast(english, "#panel-practice")
    assert_local(english, server)


def test_practice_hint_and_progress_survive_a_reload(english, server):
    open_fresh(english, server, seed("en"))
    english.find_element("id", "tab-practice").click()
    wait(english, lambda: english.find_elements("id", "practice-scores-2-input"), what="the boxes")
    for j, value in enumerate(["0.92", "0.19", "0.75"]):
        english.find_element("id", f"practice-scores-{j}-input").send_keys(value)
    reveal = english.find_element("id", "practice-reveal")
    wait(english, lambda: reveal.is_enabled(), what="the reveal button")
    reveal.click()
    english.find_element("id", "practice-next").click()
    assert english.find_element("id", "practice-question").text == "Compute the scaled S/√d_k of “it”."
    english.find_element("id", "practice-scaled-0-input").send_keys("0.651")
    english.find_element("id", "practice-hint").click()
    wait(english, lambda: english.find_element("id", "practice-hint-text").is_displayed(), what="the hint")
    tex = english.execute_script(
        "return Array.from(document.querySelectorAll('#practice-hint-text annotation')).map(a => a.textContent)"
    )
    assert tex == [
        "\\begin{aligned}\n"
        "z_{\\text{cat}} &= \\frac{s_{\\text{cat}}}{\\sqrt{2}} = \\frac{0.92}{\\sqrt{2}} \\\\\n"
        "z_{\\text{eats}} &= \\frac{s_{\\text{eats}}}{\\sqrt{2}} = \\frac{0.19}{\\sqrt{2}} \\\\\n"
        "z_{\\text{it}} &= \\frac{s_{\\text{it}}}{\\sqrt{2}} = \\frac{0.75}{\\sqrt{2}}\n"
        "\\end{aligned}"
    ]
    assert (
        english.find_element("css selector", "#practice-hint-text p").text == "Divide each of your scores by the scale:"
    )
    # 0.92/√2 = 0.6505…: 0.651 is correctly rounded
    wait(english, lambda: practice_verdicts(english)["practice-scaled-0"] == "rounded", what="the verdict of 0.651")
    saved = lambda: english.execute_script("return localStorage.getItem('symattn.serve.state')") or ""  # noqa: E731
    wait(english, lambda: '"0.651"' in saved(), what="the progress saved")
    # reload from the link alone: the tab, the step, the numbers and what was revealed come back
    link = english.current_url
    english.get("about:blank")
    forget(english, server)
    english.get(link)
    wait(english, lambda: english.find_elements("id", "practice-scaled-0-input"), what="the restored step")
    assert english.find_element("id", "tab-practice").get_attribute("aria-selected") == "true"
    assert english.find_element("id", "practice-scaled-0-input").get_attribute("value") == "0.651"
    wait(english, lambda: practice_verdicts(english)["practice-scaled-0"] == "rounded", what="the restored verdict")
    english.find_element("id", "practice-previous").click()
    typed = [english.find_element("id", f"practice-scores-{j}-input").get_attribute("value") for j in range(3)]
    assert typed == ["0.92", "0.19", "0.75"]
    wait(english, lambda: english.find_element("id", "practice-step").is_displayed(), what="the revealed step again")


def test_hint_escapes_the_labels(client):
    raw = seed("en")
    raw["tokens"], raw["focus"] = ["<img src=x onerror=alert(1)>", "a&b", "}\\x"], "3"
    response = client.post("/api/hint", json={"spec": raw, "quantity": "weights"})
    html = response.json()["html"]
    assert response.status_code == 200 and "<img" not in html
    # TeX's own escapes inside \text{}, then HTML's
    assert "\\text{\\textless{}img src=x onerror=alert(1)\\textgreater{}}" in html
    assert "A_{\\text{\\}\\textbackslash{}x},\\text{a\\&amp;b}}" in html


def test_a_variant_control_is_one_entry(monkeypatch):
    import symattn.web.app as app

    # a new key (here one whose [ui] phrase exists already) is one entry: its control and its label come
    extra = [
        {"key": "expand", "kind": "text", "default": ""},
        {"key": "rounding", "kind": "number", "min": 0, "max": 9},
    ]
    monkeypatch.setattr(app, "variants", lambda: variants() + extra)
    page = app.page_html(seed("en"), "en")
    area = re.search(r'<fieldset class="settings variant" id="variant">(.*?)</fieldset>', page, re.S).group(1)
    assert re.findall(r'data-key="([a-z_]+)" data-variant="([a-z]+)"', area) == [
        ("mask", "select"),
        ("softmax", "select"),
        ("heads", "number"),
        ("kv_heads", "number"),
        ("window", "number"),
        ("causal_align", "select"),
        ("alibi", "flag"),
        ("alibi_slopes", "list"),
        ("softcap", "text"),
        ("sinks", "list"),
        ("rope", "flag"),
        ("rope_base", "text"),
        ("rope_style", "select"),
        ("rope_frequencies", "list"),
        ("rope_cos", "table"),
        ("rope_sin", "table"),
        ("qk_norm", "flag"),
        ("qk_norm_eps", "text"),
        ("block_keys", "number"),
        ("split_keys", "number"),
        ("positions", "list"),
        ("key_positions", "list"),
        ("mla_route", "select"),
        ("expand", "text"),
        ("rounding", "number"),
    ]
    assert '<label for="set-expand" data-ui="expand">Expand</label>' in area
    assert '<label for="set-mla_route" data-ui="mla_route">MLA route (with an [mla] table)</label>' in area
    boot = json.loads(re.search(r'<script id="boot" type="application/json">(.*?)</script>', page, re.S).group(1))
    assert boot["variants"][-2:] == extra  # app.js builds, fills and reads the controls from this list


def test_only_the_weights_have_closed_forms_on_hover(english, server):
    open_fresh(english, server, seed("en"))
    examples = json.loads(english.execute_script("return fetch('/api/examples').then(r => r.text())"))
    index = next(i for i, e in enumerate(examples) if (e["name"], e["lang"]) == ("backward", "en"))
    choose(english, "example", str(index))
    english.find_element("id", "load-example").click()
    raw = as_json(read_table(builtin.example_path("backward", "en")))
    wait_math(english, math_of(fragment(raw)), "the backward example")
    figures = english.execute_script(
        "return Array.from(document.querySelectorAll('#figures .figure')).map(f => [f.dataset.figure, "
        "f.querySelectorAll('rect.cell, line.weight').length, f.querySelectorAll('title.hover').length])"
    )
    assert figures == [["weights", 9, 9], ["tokens", 3, 3], ["dz", 9, 0]]


def test_the_mla_example_and_its_route_on_the_page(english, server):
    # the [mla] table has no grid of its own: it is kept as given; the route is a select, its default leaves the spec
    open_fresh(english, server, seed("en"))
    examples = json.loads(english.execute_script("return fetch('/api/examples').then(r => r.text())"))
    choose(english, "example", str(next(i for i, e in enumerate(examples) if (e["name"], e["lang"]) == ("mla", "en"))))
    english.find_element("id", "load-example").click()
    raw = as_json(read_table(builtin.example_path("mla", "en")))
    wait_math(english, math_of(fragment(raw)), "the MLA example, absorbed")
    assert english.find_element("id", "set-mla_route").get_attribute("value") == "absorbed"
    choose(english, "set-mla_route", "naive")
    del raw["mla_route"]
    wait_math(english, math_of(fragment(raw)), "the MLA example, naive")
