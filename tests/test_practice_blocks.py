"""Practice mode through the blocks of the online softmax (block_keys): the focus row's running max, rescale,
running sum and accumulator, block by block, judged by symattn check's checker with error carried forward.
The hint API in process; the round in headless Chromium against a real server."""

from __future__ import annotations

import pytest

from symattn.input import builtin
from symattn.input.files import read_table

pytest.importorskip("starlette", reason="starlette (the web extra) is needed for symattn serve")
pytest.importorskip("uvicorn", reason="uvicorn (the web extra) is needed for symattn serve")
pytest.importorskip("httpx", reason="httpx drives the API tests")

from starlette.testclient import TestClient  # noqa: E402

from symattn.web.app import create_app  # noqa: E402

from .test_serve import as_json, choose, fragment, math_of, wait, wait_math  # noqa: E402
from .test_serve_live import english, open_fresh, server  # noqa: E402, F401  (fixtures)


def flash(lang: str = "en") -> dict:
    return as_json(read_table(builtin.example_path("flash", lang)))


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(hosts=("testserver",)), raise_server_exceptions=True) as c:
        yield c


# the focus row "tea" of the flash example (scale 1): z = [0.5, −2, 1, −0.5], blocks of two keys
SCALED = ["0.5", "-2", "1", "-0.5"]


def test_a_blocks_hint_is_its_formulas_with_the_students_numbers(client):
    claims = {"rows": {"tea": {"scaled": SCALED}}, "running_max[1][4]": "0.5", "running_sum[1][4]": "1.082"}
    response = client.post("/api/hint", json={"spec": flash(), "quantity": "block", "block": 2, "claims": claims})
    assert response.status_code == 200, response.json()
    assert response.json()["html"] == (
        "<p>Block 2 of “tea”: the new max, the rescale of what came before, then the sum and the accumulator, "
        "from your numbers:</p>\n"
        '<div class="math display">\\begin{aligned}\n'
        "m_{2} &amp;= \\max\\bigl(m_{1},\\ z_{\\text{green}},\\ z_{\\text{tea}}\\bigr) = "
        "\\max\\bigl( 0.5,\\ 1,\\ -0.5\\bigr) \\\\\n"
        "r_{2} &amp;= e^{m_{1} - m_{2}} = e^{0.5 - \\square} \\\\\n"
        "l_{2} &amp;= r_{2}\\,l_{1} + \\textstyle\\sum_j e^{z_j - m_{2}} = "
        "\\square\\times 1.082 + e^{1 - \\square} + e^{-0.5 - \\square} \\\\\n"
        "\\mathrm{acc}_{2,1} &amp;= r_{2}\\,\\mathrm{acc}_{1,1} + \\textstyle\\sum_j e^{z_j - m_{2}} V_{j,1} = "
        "\\square\\times \\square + e^{1 - \\square}\\times 1 + e^{-0.5 - \\square}\\times 2 \\\\\n"
        "\\mathrm{acc}_{2,2} &amp;= r_{2}\\,\\mathrm{acc}_{1,2} + \\textstyle\\sum_j e^{z_j - m_{2}} V_{j,2} = "
        "\\square\\times \\square + e^{1 - \\square}\\times 1 + e^{-0.5 - \\square}\\times 0\n"
        "\\end{aligned}</div>\n"
    )
    first = client.post("/api/hint", json={"spec": flash("zh"), "quantity": "block", "block": 1, "claims": {}})
    assert first.json()["html"].startswith(
        "<p>「茶」的第 1 块：先取新的最大值，再算之前的缩放因子，然后用你的数算和与累加器：</p>"
    )
    assert "= \\max\\bigl( -\\infty,\\ \\square,\\ \\square\\bigr)" in first.json()["html"]


def test_the_output_of_a_round_through_the_blocks_is_acc_over_l(client):
    claims = {"running_sum[2][4]": "1.880", "accumulator[2][4]": ["2.053", ""]}
    response = client.post("/api/hint", json={"spec": flash(), "quantity": "output", "claims": claims})
    assert response.json()["html"] == (
        "<p>Divide your last accumulator by your last running sum, column by column:</p>\n"
        '<div class="math display">\\begin{aligned}\n'
        "O_{\\text{tea},1} &amp;= \\frac{\\mathrm{acc}_{2,1}}{l_{2}} = \\frac{2.053}{1.880} \\\\\n"
        "O_{\\text{tea},2} &amp;= \\frac{\\mathrm{acc}_{2,2}}{l_{2}} = \\frac{\\square}{1.880}\n"
        "\\end{aligned}</div>\n"
    )


@pytest.mark.parametrize(
    "body, message",
    [
        ({"quantity": "block"}, "request: block: missing"),
        ({"quantity": "block", "block": 3}, "request: block: expected a block from 1 to 2, got 3"),
        ({"quantity": "block", "block": True}, "request: block: expected a block from 1 to 2, got true"),
        ({"quantity": "exp", "block": 1}, "request: block: only a block's hint takes a block"),
    ],
)
def test_block_hint_errors(client, body, message):
    response = client.post("/api/hint", json={"spec": flash(), **body})
    assert response.status_code == 400 and response.json()["error"] == message


def test_a_block_hint_without_block_keys_says_why(client):
    spec = {key: value for key, value in flash().items() if key not in ("block_keys", "split_keys")}
    response = client.post("/api/hint", json={"spec": spec, "quantity": "block", "block": 1})
    assert response.json()["error"] == "spec: block_keys: a block's hint needs block_keys"


# --- the round in Chromium --------------------------------------------------------------------------------


def _open_flash(driver, url: str) -> None:
    import json

    open_fresh(driver, url, as_json(read_table(builtin.example_path("seed", "en"))))
    examples = json.loads(driver.execute_script("return fetch('/api/examples').then(r => r.text())"))
    index = next(i for i, e in enumerate(examples) if (e["name"], e["lang"]) == ("flash", "en"))
    choose(driver, "example", str(index))
    driver.find_element("id", "load-example").click()
    wait_math(driver, math_of(fragment(flash())), "the flash example")
    driver.find_element("id", "tab-practice").click()


def _answer(driver, boxes: dict[str, list[str]], expected: dict[str, list[str]]) -> None:
    """Type each box's numbers (box id -> numbers) and wait for the verdicts shown (box id -> verdicts)."""
    first = next(iter(boxes))
    wait(driver, lambda: driver.find_elements("id", f"{first}-0-input"), what=first)
    for box, numbers in boxes.items():
        for j, value in enumerate(numbers):
            driver.find_element("id", f"{box}-{j}-input").send_keys(value)

    def shown():
        return {
            box: [driver.find_element("id", f"{box}-{j}").get_attribute("data-verdict") for j in range(len(numbers))]
            for box, numbers in boxes.items()
        }

    wait(driver, lambda: shown() == expected, what=f"the verdicts {expected}, not {shown()}")


def test_practice_steps_through_the_blocks_by_hand(english, server):
    driver = english
    _open_flash(driver, server)
    wait(driver, lambda: driver.find_element("id", "practice-progress").text == "Step 1 of 5", what="5 steps")
    _answer(driver, {"practice-scores": SCALED}, {"practice-scores": ["exact"] * 4})
    driver.find_element("id", "practice-next").click()
    _answer(driver, {"practice-scaled": SCALED}, {"practice-scaled": ["exact"] * 4})
    driver.find_element("id", "practice-next").click()
    wait(driver, lambda: driver.find_element("id", "practice-progress").text == "Step 3 of 5", what="block 1")
    assert driver.find_element("id", "practice-question").text == (
        "Block 1 (keys “I”, “like”): compute the running max m, the rescale e^(m_old − m_new), the running sum l "
        "and the accumulator acc of “tea”."
    )
    assert [c.text for c in driver.find_elements("css selector", "#practice-boxes .caption")] == [
        "m",
        "e^(m_old − m_new)",
        "l",
        "acc, column 1",
        "acc, column 2",
    ]
    _answer(
        driver,
        {
            "practice-running_max-b1": ["0.5"],
            "practice-rescale-b1": ["0"],
            "practice-running_sum-b1": ["1.082"],
            "practice-accumulator-b1": ["1", "0.082"],
        },
        {
            "practice-running_max-b1": ["exact"],
            "practice-rescale-b1": ["exact"],
            "practice-running_sum-b1": ["rounded"],
            "practice-accumulator-b1": ["exact", "rounded"],
        },
    )
    driver.find_element("id", "practice-next").click()
    # block 2 from the student's rounded numbers: l = 0.607 × 1.082 + e^0 + e^(−1.5) = 1.880 (exact 1.879)
    _answer(
        driver,
        {
            "practice-running_max-b2": ["1"],
            "practice-rescale-b2": ["0.607"],
            "practice-running_sum-b2": ["1.880"],
            "practice-accumulator-b2": ["2.053", "1.050"],
        },
        {
            "practice-running_max-b2": ["exact"],
            "practice-rescale-b2": ["rounded"],
            "practice-running_sum-b2": ["hand"],
            "practice-accumulator-b2": ["rounded", "rounded"],
        },
    )
    box = driver.find_element("id", "practice-running_sum-b2-0")
    assert box.find_element("css selector", ".verdict").text == "✔\nright, from your rounded numbers"
    driver.find_element("id", "practice-hint").click()
    hint = wait(
        driver,
        lambda: driver.execute_script(
            "return Array.from(document.querySelectorAll('#practice-hint-text annotation')).map(a => a.textContent)"
            ".join(' ')"
        ),
        what="the block's hint",
    )
    assert "0.607\\times 1.082 + e^{1 - 1} + e^{-0.5 - 1}" in hint
    driver.find_element("id", "practice-reveal").click()
    revealed = wait(driver, lambda: driver.find_element("id", "practice-step").text, what="the tiling step")
    assert revealed.startswith("The online softmax, block by block (FlashAttention)\n")
    # worked by hand, as the student did: l = 1.880 from 0.607 × 1.082 + …, where the exact l rounds to 1.879
    assert "Block 2 (keys 3 to 4):" in revealed and "1.880" in revealed and "1.879" not in revealed
    driver.find_element("id", "practice-next").click()
    _answer(driver, {"practice-output": ["1.092", "0.559"]}, {"practice-output": ["rounded", "rounded"]})
    driver.find_element("id", "practice-reveal").click()  # O = acc / l: the tiles' step again, not the weights'
    wait(driver, lambda: "After the last block" in driver.find_element("id", "practice-step").text, what="O = acc / l")
    assert driver.find_element("id", "practice-next").get_attribute("disabled") == "true"
    # a reload keeps the round where it was, with its numbers
    driver.refresh()
    wait(driver, lambda: driver.find_elements("id", "practice-output-0-input"), what="the output step again")
    assert driver.find_element("id", "practice-output-1-input").get_attribute("value") == "0.559"
    driver.find_element("id", "practice-previous").click()
    wait(
        driver,
        lambda: driver.find_element("id", "practice-running_sum-b2-0").get_attribute("data-verdict") == "hand",
        what="block 2 kept",
    )


def test_a_wrong_running_max_is_carried_not_right(english, server):
    driver = english
    _open_flash(driver, server)
    for step in ("scores", "scaled"):
        _answer(driver, {f"practice-{step}": SCALED}, {f"practice-{step}": ["exact"] * 4})
        driver.find_element("id", "practice-next").click()
    _answer(driver, {"practice-running_max-b1": ["0.5"]}, {"practice-running_max-b1": ["exact"]})
    driver.find_element("id", "practice-next").click()
    # m_2 = 0.5 (the larger z of block 2 is 1): the rescale from it, e^0 = 1.000, follows but is not right
    _answer(
        driver,
        {"practice-running_max-b2": ["0.5"], "practice-rescale-b2": ["1.000"]},
        {"practice-running_max-b2": ["wrong"], "practice-rescale-b2": ["carried"]},
    )
    assert "tone-carried" in driver.find_element("id", "practice-rescale-b2-0").get_attribute("class")


def test_a_block_of_one_key_is_asked_as_one_key(english, server):
    import base64
    import json

    from .test_serve_live import forget

    driver = english
    spec = flash()
    spec["block_keys"] = 3  # four keys: block 2 holds "tea" alone
    spec.pop("split_keys", None)
    state = {"spec": spec, "claims": {}, "tab": "practice", "row": "focus", "practice": {"step": 3}}
    forget(driver, server)
    driver.get(f"{server}#j=" + base64.urlsafe_b64encode(json.dumps(state).encode()).decode().rstrip("="))
    wait(driver, lambda: driver.find_element("id", "practice-progress").text == "Step 4 of 5", what="block 2")
    assert driver.find_element("id", "practice-question").text == (
        "Block 2 (key “tea”): compute the running max m, the rescale e^(m_old − m_new), the running sum l "
        "and the accumulator acc of “tea”."
    )
