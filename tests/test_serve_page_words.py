"""symattn serve's page at 1000 px, in each of its languages: no reason under a verdict covers an input, every
message (the server's errors too) is in the page's language, and practice follows the chain a student works
by hand. A real server, the page in headless Chromium."""

from __future__ import annotations

import pytest

from symattn.rendering.phrases import load_language

from .conftest import chromium_driver
from .test_serve import as_json, cell, open_fresh, retype, seed_raw, server, wait  # noqa: F401  (server: the fixture)

BROWSERS = {"en": "en-US,en", "zh": "zh-CN,zh"}


@pytest.fixture(scope="module", params=["en", "zh"])
def page(request):
    """(driver, lang): a browser in that language, 1000 px wide."""
    driver = chromium_driver("1000,800", loopback=True, scrollbars=False, languages=BROWSERS[request.param])
    try:
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1000, "height": 800, "deviceScaleFactor": 1, "mobile": False},
        )
        yield driver, request.param
    finally:
        driver.quit()


def opened(driver, url: str, lang: str) -> None:
    open_fresh(driver, url, seed_raw(lang))


# --- the check tab: reasons under their boxes -----------------------------------------------------------

COVERED = """
const inputs = Array.from(document.querySelectorAll('#boxes input.claim'));
const out = [];
for (const input of inputs) {
  input.scrollIntoView({block: 'center'});
  const r = input.getBoundingClientRect();
  for (const [x, y] of [[r.left + 2, r.top + 2], [r.left + r.width / 2, r.top + r.height / 2], [r.right - 2, r.bottom - 2]]) {
    const hit = document.elementFromPoint(x, y);
    if (hit !== input) out.push([input.id, hit ? (hit.id || hit.className || hit.tagName) : null]);
  }
}
return out;
"""


def test_no_reason_covers_an_input(page, server):
    from selenium.webdriver.support.ui import Select

    driver, lang = page
    opened(driver, server, lang)
    driver.find_element("id", "tab-check").click()
    Select(driver.find_element("id", "check-row")).select_by_value("all")
    wait(driver, lambda: len(driver.find_elements("css selector", "#boxes input.claim")) == 55, what="55 boxes")
    inputs = driver.find_elements("css selector", "#boxes input.claim")
    # wrong numbers, every box's at once (typing each is 55 round trips; the layout is what is tested here,
    # and test_check_tab_verdicts types): every box gets a reason under it
    driver.execute_script(
        "arguments[0].forEach((box, k) => { box.value = String(7 + k); "
        "box.dispatchEvent(new Event('input', {bubbles: true})); });",
        inputs,
    )
    wait(
        driver,
        lambda: (
            driver.execute_script(
                "return Array.from(document.querySelectorAll('#boxes .explain')).filter(e => e.textContent).length"
            )
            == 55
        ),
        what="a reason under every box",
    )
    assert driver.execute_script(COVERED) == []
    for box in inputs:  # a real click on each (scrolled into view first): Chrome refuses one that another
        box.click()  # element would receive
        assert driver.switch_to.active_element == box


def test_a_correctly_rounded_number_has_no_reason_and_a_wrong_one_says_the_right_number(page, server):
    driver, lang = page
    opened(driver, server, lang)
    driver.find_element("id", "tab-check").click()
    sqrt = wait(driver, lambda: driver.find_elements("id", "box-sqrt_dk-n-n-input"), what="the boxes")[0]
    sqrt.send_keys("1.414")
    box = driver.find_element("id", "box-sqrt_dk-n-n")
    wait(driver, lambda: box.get_attribute("data-verdict") == "rounded", what="the verdict of 1.414")
    assert box.find_element("css selector", ".explain").text == ""
    retype(sqrt, "1.515")
    wait(driver, lambda: box.get_attribute("data-verdict") == "wrong", what="the verdict of 1.515")
    expected = load_language(lang)["report"]["expected"].format(value="1.414")
    assert (
        box.find_element("css selector", ".explain").text
        == expected
        == {
            "en": "correctly rounded: 1.414",
            "zh": "正确舍入：1.414",
        }[lang]
    )


# --- errors in the page's language ----------------------------------------------------------------------

COMMA = {
    "en": "spec: Q[3][1]: not a number: '0,5' (a decimal comma? write '0.5')",
    "zh": "spec: Q[3][1]: 不是数：'0,5'（是小数逗号吗？请写 '0.5'）",
}
CLAIM = {
    "en": "claims: claims.rows.it.scores[1]: not a number: 'abc'",
    "zh": "claims: claims.rows.它.scores[1]: 不是数：'abc'",
}
TOKEN = {
    "en": "spec: tokens[2]: longer than 40 characters",
    "zh": "spec: tokens[2]: 超过 40 个字符",
}


def inline_error(driver) -> str:
    return wait(driver, lambda: driver.find_elements("id", "input-error"), what="the inline error")[0].text


def test_the_servers_errors_are_in_the_pages_language(page, server):
    driver, lang = page
    opened(driver, server, lang)
    retype(cell(driver, "Q", "3,1"), "0,5")
    assert inline_error(driver) == COMMA[lang]
    retype(cell(driver, "Q", "3,1"), "0.9")
    wait(driver, lambda: not driver.find_elements("id", "input-error"), what="the error to go")
    retype(driver.find_element("id", "tokens-2"), "x" * 41)
    assert inline_error(driver) == TOKEN[lang]
    retype(driver.find_element("id", "tokens-2"), seed_raw(lang)["tokens"][1])
    wait(driver, lambda: not driver.find_elements("id", "input-error"), what="the error to go")
    driver.find_element("id", "tab-check").click()
    first = wait(driver, lambda: driver.find_elements("id", "box-scores-2-0-input"), what="the boxes")[0]
    first.send_keys("abc")
    error = driver.find_element("id", "check-error")
    wait(driver, lambda: error.is_displayed() and error.text, what="the claims error")
    assert error.text == CLAIM[lang]


def test_an_error_is_said_again_in_the_language_switched_to(page, server):
    driver, lang = page
    if lang != "en":
        pytest.skip("one switch, from English to Chinese")
    from selenium.webdriver.support.ui import Select

    opened(driver, server, lang)
    retype(cell(driver, "Q", "3,1"), "0,5")
    assert inline_error(driver) == COMMA["en"]
    Select(driver.find_element("id", "set-lang")).select_by_value("zh")
    wait(driver, lambda: inline_error(driver) == COMMA["zh"], what="the error in Chinese")


# --- practice: the hand chain ---------------------------------------------------------------------------

# the seed's row of "it", worked by hand: each step from the rounded numbers before it; the sum of the
# exps is 4.759 by hand (4.760 exactly), and the output 4.387 = 0.403 × 10 + 0.240 × 0 + 0.357 × 1
# (4.384 exactly)
BY_HAND = {
    "scores": ["0.92", "0.19", "0.75"],
    "scaled": ["0.651", "0.134", "0.530"],
    "exp": ["1.917", "1.143", "1.699"],
    "exp_sum": ["4.759"],
    "weights": ["0.403", "0.240", "0.357"],
    "output": ["4.387", "2.757"],
}
SHOWN = {
    "scores": ["exact", "exact", "exact"],
    "scaled": ["rounded", "rounded", "rounded"],
    "exp": ["rounded", "hand", "rounded"],
    "exp_sum": ["hand"],
    "weights": ["rounded", "rounded", "rounded"],
    "output": ["hand", "hand"],
}


def test_practice_follows_the_hand_chain(page, server):
    driver, lang = page
    if lang != "en":
        pytest.skip("the hand chain is the same in both languages; once, in English")
    raw = as_json(seed_raw("en"))
    open_fresh(driver, server, raw)
    driver.find_element("id", "tab-practice").click()
    for quantity, numbers in BY_HAND.items():
        wait(driver, lambda q=quantity: driver.find_elements("id", f"practice-{q}-0-input"), what=quantity)
        for j, value in enumerate(numbers):
            driver.find_element("id", f"practice-{quantity}-{j}-input").send_keys(value)
        shown = lambda q=quantity, n=len(numbers): [  # noqa: E731
            driver.find_element("id", f"practice-{q}-{j}").get_attribute("data-verdict") for j in range(n)
        ]
        wait(driver, lambda q=quantity, s=shown: s() == SHOWN[q], what=f"the verdicts of {quantity}: {shown()}")
        if quantity != "output":
            driver.find_element("id", "practice-next").click()
    box = driver.find_element("id", "practice-output-0")
    assert box.find_element("css selector", ".verdict").text == "✔\nright, from your rounded numbers"
    assert "tone-good" in box.get_attribute("class")
    driver.find_element("id", "practice-reveal").click()
    tex = wait(
        driver,
        lambda: driver.execute_script(
            "return Array.from(document.querySelectorAll('#practice-step annotation')).map(a => a.textContent).join(' ')"
        ),
        what="the revealed step",
    )
    # the step worked by hand: the numbers the student was led to, not the exact ones
    assert "0.403\\cdot[10,\\ 0] + 0.240\\cdot[0,\\ 10] + 0.357\\cdot[1,\\ 1]" in tex and "[4.387,\\ 2.757]" in tex
    assert "4.384" not in tex and "4.027" not in tex
    intro = driver.find_element("css selector", "#panel-practice .intro").text
    assert intro.startswith("Work out the focus row step by step, as by hand: each step from your own rounded")


# --- the same errors through the API: the language of Accept-Language -----------------------------------

API_ERRORS = [
    ("title", "$\\foo$", "spec: title: \\foo is not allowed in math", "spec: title: 数学中不允许 \\foo"),
    (
        "heads",
        3,
        "spec: heads: Q and K have 2 columns, not divisible by heads = 3",
        "spec: heads: Q 和 K 有 2 列，不能被 heads = 3 整除",
    ),
    (
        "softcap",
        "-2",
        "spec: softcap: expected a number > 0 and at most 1000, got -2",
        "spec: softcap: 应为大于 0、最多 1000 的数，实为 -2",
    ),
    (
        "softcap",
        "0",
        'spec: softcap: 0 is FlashAttention\'s "no cap" (symattn.kernel.compare takes it so); a spec has no cap by '
        "leaving softcap out",
        "spec: softcap: 0 在 FlashAttention 中表示不设上限（symattn.kernel.compare 亦如此）；规格不设上限时请省去 softcap",
    ),
    (
        "tokens",
        ["a", "a", "b"],
        "spec: tokens[2]: duplicate label 'a' (also tokens[1])",
        "spec: tokens[2]: 标签 'a' 重复（tokens[1] 也是它）",
    ),
]


@pytest.mark.parametrize("key, value, en, zh", API_ERRORS)
def test_an_api_error_is_in_the_language_asked_for(key, value, en, zh):
    pytest.importorskip("starlette", reason="starlette (the web extra) is needed for symattn serve")
    from starlette.testclient import TestClient

    from symattn.web.app import create_app

    with TestClient(create_app(hosts=("testserver",))) as client:
        for lang, message in (("en", en), ("zh", zh), (None, en)):  # no Accept-Language: the CLI's English
            raw = dict(as_json(seed_raw(lang or "en")), **{key: value})
            headers = {"accept-language": lang} if lang else {}
            answer = client.post("/api/render", json={"spec": raw}, headers=headers)
            assert (answer.status_code, answer.json()["error"]) == (400, message)
