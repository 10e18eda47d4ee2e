"""Practice mode with RoPE and QK-norm: the turn (every token's angles, their cos and sin, the focus row's Q′ and
every key's K′) or the norm (σ of each row, the normalized rows) before the scores, judged by symattn check's
checker with error carried forward; MLA's decoupled dims turn the same way. The hint API in process; the rounds
in headless Chromium against a real server, in English and in Chinese."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette", reason="starlette (the web extra) is needed for symattn serve")
pytest.importorskip("uvicorn", reason="uvicorn (the web extra) is needed for symattn serve")
pytest.importorskip("httpx", reason="httpx drives the API tests")

from starlette.testclient import TestClient  # noqa: E402

from symattn.web.app import create_app  # noqa: E402

from .test_practice_blocks import _answer  # noqa: E402
from .test_practice_mla import _open, _text, example  # noqa: E402
from .test_practice_mla import page as page  # noqa: E402, F401  (the fixture: a browser in each language)
from .test_serve import wait  # noqa: E402
from .test_serve_live import server  # noqa: E402, F401  (the fixture)


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(hosts=("testserver",)), raise_server_exceptions=True) as c:
        yield c


def hint(client, name: str, quantity: str, claims: dict, lang: str = "en") -> str:
    response = client.post("/api/hint", json={"spec": example(name, lang), "quantity": quantity, "claims": claims})
    assert response.status_code == 200, response.json()
    return response.json()["html"]


def aligned(*lines: str) -> str:
    return '<div class="math display">\\begin{aligned}\n' + " \\\\\n".join(lines) + "\n\\end{aligned}</div>\n"


# rope-angles: θ = 30°, Q = [[1, 0], [0, 1], [1, 1]], K = [[1, 0], [1, 1], [0, 1]]; the focus row "tea" (position 2)
TURNED = {"rope_angle[2]": ["0.7"], "rope_cos[2]": ["0.765"], "rope_sin[2]": ["0.644"], "Q_rot[3]": ["-0.366", ""]}


def test_the_angles_hint_is_position_times_frequency(client):
    assert hint(client, "rope-angles", "angle", {}) == (
        "<p>Each angle is the token's position times the pair's frequency:</p>\n"
        + aligned(
            "&amp;\\theta_{1} = \\frac{\\pi}{6}",
            "\\varphi_{\\text{I},1} &amp;= 0 \\cdot \\theta_{1}",
            "\\varphi_{\\text{like},1} &amp;= 1 \\cdot \\theta_{1}",
            "\\varphi_{\\text{tea},1} &amp;= 2 \\cdot \\theta_{1}",
        )
    )
    # the base's rule where no frequency is given
    assert "&amp;\\theta_t = 10000^{-2(t-1)/d_k} = 10000^{-(t-1)/2},\\ t = 1, 2 \\\\\n" in hint(
        client, "rope", "angle", {}
    )


def test_the_turns_hints_take_the_students_angles_cos_and_sin(client):
    assert hint(client, "rope-angles", "trig", TURNED) == (
        "<p>Take cos and sin of each of your angles:</p>\n"
        + aligned(
            "\\cos\\varphi_{\\text{I},1} &amp;= \\cos\\bigl( \\square \\bigr),\\quad "
            "\\sin\\varphi_{\\text{I},1} = \\sin\\bigl( \\square \\bigr)",
            "\\cos\\varphi_{\\text{like},1} &amp;= \\cos\\bigl( 0.7 \\bigr),\\quad "
            "\\sin\\varphi_{\\text{like},1} = \\sin\\bigl( 0.7 \\bigr)",
            "\\cos\\varphi_{\\text{tea},1} &amp;= \\cos\\bigl( \\square \\bigr),\\quad "
            "\\sin\\varphi_{\\text{tea},1} = \\sin\\bigl( \\square \\bigr)",
        )
    )
    assert hint(client, "rope-angles", "K_rot", TURNED).endswith(
        aligned(
            "K'_{\\text{I},1} &amp;= 1\\times \\square - 0\\times \\square",
            "K'_{\\text{I},2} &amp;= 1\\times \\square + 0\\times \\square",
            "K'_{\\text{like},1} &amp;= 1\\times 0.765 - 1\\times 0.644",
            "K'_{\\text{like},2} &amp;= 1\\times 0.644 + 1\\times 0.765",
            "K'_{\\text{tea},1} &amp;= 0\\times \\square - 1\\times \\square",
            "K'_{\\text{tea},2} &amp;= 0\\times \\square + 1\\times \\square",
        )
    )
    assert hint(client, "rope-angles", "scores", {**TURNED, "K_rot[2]": ["0.121", "1.409"]}) == (
        "<p>Each score of “tea” is your turned query times one of your turned keys:</p>\n"
        + aligned(
            "Q'_{\\text{tea}}\\cdot K'_{\\text{I}} &amp;= \\left(-0.366\\right)\\times \\square + \\square\\times \\square",
            "Q'_{\\text{tea}}\\cdot K'_{\\text{like}} &amp;= \\left(-0.366\\right)\\times 0.121 + \\square\\times 1.409",
            "Q'_{\\text{tea}}\\cdot K'_{\\text{tea}} &amp;= \\left(-0.366\\right)\\times \\square + \\square\\times \\square",
        )
    )
    assert hint(client, "rope-angles", "Q_rot", {}, "zh").startswith(
        "<p>用你算的「茶」那一行的 cos 和 sin 旋转它查询的每一对 (a, b)，即 (a cos − b sin, a sin + b cos)：</p>\n"
    )


def test_the_norms_hints_are_sigma_then_the_row_over_your_sigma(client):
    assert hint(client, "qk-norm", "rms", {}) == (
        "<p>σ of a row is the square root of the mean of its squares plus ε:</p>\n"
        + aligned(
            "\\sigma_{q,\\text{tea}} &amp;= \\sqrt{\\tfrac{3^2 + 4^2}{2} + 1\\times 10^{-6}}",
            "\\sigma_{k,\\text{I}} &amp;= \\sqrt{\\tfrac{1^2 + 1^2}{2} + 1\\times 10^{-6}}",
            "\\sigma_{k,\\text{like}} &amp;= \\sqrt{\\tfrac{2^2 + 0^2}{2} + 1\\times 10^{-6}}",
            "\\sigma_{k,\\text{tea}} &amp;= \\sqrt{\\tfrac{0^2 + 3^2}{2} + 1\\times 10^{-6}}",
        )
    )
    claims = {"Q_rms[3]": "3.6", "K_rms[2]": "1.414", "Q_norm[3]": ["0.833", ""], "K_norm[1]": ["1", "1"]}
    assert hint(client, "qk-norm", "Q_norm", claims).endswith(
        aligned("\\hat{q}_{\\text{tea},1} &amp;= \\frac{3}{3.6}", "\\hat{q}_{\\text{tea},2} &amp;= \\frac{4}{3.6}")
    )
    assert "\\hat{k}_{\\text{like},1} &amp;= \\frac{2}{1.414} \\\\\n" in hint(client, "qk-norm", "K_norm", claims)
    assert hint(client, "qk-norm", "scores", claims).endswith(
        aligned(
            "\\hat{Q}_{\\text{tea}}\\cdot \\hat{K}_{\\text{I}} &amp;= 0.833\\times 1 + \\square\\times 1",
            "\\hat{Q}_{\\text{tea}}\\cdot \\hat{K}_{\\text{like}} &amp;= 0.833\\times \\square + \\square\\times \\square",
            "\\hat{Q}_{\\text{tea}}\\cdot \\hat{K}_{\\text{tea}} &amp;= 0.833\\times \\square + \\square\\times \\square",
        )
    )
    assert hint(client, "qk-norm", "rms", {}, "zh").startswith("<p>一行的 σ 是它各元素平方的均值加 ε 再开平方：</p>\n")


def test_the_absorbed_scores_add_the_turned_decoupled_dims(client):
    claims = {"Q_rot[3]": ["", "", "-1.325", "0.493"], "K_rot[2]": ["", "", "0.540", "0.841"]}
    html = hint(client, "mla-rope", "absorbed", {**claims, "rows": {"sat": {"absorbed_query": ["1", "2"]}}})
    assert (
        "S_{\\text{sat},\\text{cat}} &amp;= \\tilde{q}\\cdot (c_{KV})_{\\text{cat}} + q'_R\\cdot k'_{R,\\text{cat}} = "
        "1\\times \\square + 2\\times \\square + \\left(-1.325\\right)\\times 0.540 + 0.493\\times 0.841 \\\\\n"
    ) in html
    # q′_R from the student's own query (X W_QR), k′_R from k_R = X W_KR, both on the decoupled dims 3 and 4
    claims = {"Q[3]": ["1", "1", "1", "1"], "rope_cos[3]": ["-0.416"], "rope_sin[3]": ["0.909"]}
    assert hint(client, "mla-rope", "Q_rot", claims).endswith(
        aligned(
            "Q'_{\\text{sat},3} &amp;= 1\\times \\left(-0.416\\right) - 1\\times 0.909",
            "Q'_{\\text{sat},4} &amp;= 1\\times 0.909 + 1\\times \\left(-0.416\\right)",
        )
    )
    assert "K'_{\\text{sat},3} &amp;= 1\\times \\square - 1\\times \\square \\\\\n" in hint(
        client, "mla-rope", "K_rot", {}
    )


def test_the_naive_scores_take_the_latent_dims_as_they_are_and_the_decoupled_dims_turned(client):
    spec = {**example("mla-rope"), "mla_route": "naive"}
    claims = {"Q[3]": ["1", "1", "1", "1"], "K[2]": ["2", "1.5", "1", "0"], "Q_rot[3]": ["", "", "-1.325", "0.493"]}
    claims["K_rot[2]"] = ["", "", "0.540", "0.841"]
    response = client.post("/api/hint", json={"spec": spec, "quantity": "scores", "claims": claims})
    assert (
        "Q'_{\\text{sat}}\\cdot K'_{\\text{cat}} &amp;= "
        "1\\times 2 + 1\\times 1.5 + \\left(-1.325\\right)\\times 0.540 + 0.493\\times 0.841 \\\\\n"
    ) in response.json()["html"]
    # the naive keys' hint: the latent dims from the student's latent, the decoupled dims X W_KR
    response = client.post("/api/hint", json={"spec": spec, "quantity": "K", "claims": {}})
    assert "K_{\\text{cat},3} &amp;= 0\\times 0 + 1\\times 1 + 1\\times 0 \\\\\n" in response.json()["html"]


def test_given_tables_are_read_not_worked(client):
    spec = {key: value for key, value in example("rope-angles").items() if key != "rope_frequencies"}
    spec |= {"rope_cos": [["1"], ["0.8"], ["0.28"]], "rope_sin": [["0"], ["0.6"], ["0.96"]]}
    response = client.post("/api/hint", json={"spec": spec, "quantity": "trig", "claims": {}})
    assert response.json()["html"] == (
        "<p>Look up each token's cos and sin in the given tables, at the row of its position (p + 1) and the column of "
        "the pair:</p>\n"
        + aligned(
            "\\cos\\varphi_{\\text{I},1} &amp;= \\mathrm{cos}_{1,1},\\quad \\sin\\varphi_{\\text{I},1} = \\mathrm{sin}_{1,1}",
            "\\cos\\varphi_{\\text{like},1} &amp;= \\mathrm{cos}_{2,1},\\quad \\sin\\varphi_{\\text{like},1} = \\mathrm{sin}_{2,1}",
            "\\cos\\varphi_{\\text{tea},1} &amp;= \\mathrm{cos}_{3,1},\\quad \\sin\\varphi_{\\text{tea},1} = \\mathrm{sin}_{3,1}",
        )
    )
    # a wrong cos read from the table is wrong, and Q′ from it carried: (0·0.9 − 1·0.6, 0·0.6 + 1·0.9)
    claims = {"rope_cos[2]": ["0.900"], "Q_rot[2]": ["-0.600", "0.900"]}
    body = client.post("/api/check", json={"spec": spec, "claims": claims, "html": False}).json()
    assert [(c["quantity"], c["col"], c["verdict"]) for c in body["claims"]] == [
        ("rope_cos", 1, "wrong"),
        ("Q_rot", 1, "exact"),
        ("Q_rot", 2, "carried"),
    ]


def test_sigma_is_claimed_and_carried_into_the_normalized_rows(client):
    # σ of "tea"'s q = [3, 4] is √(12.5 + 10⁻⁶) ≈ 3.536; from a σ of 5, q̂ = (0.6, 0.8) follows, carried
    claims = {"Q_rms[3]": "5.000", "K_rms[2]": "1.414", "Q_norm[3]": ["0.600", "0.800"], "K_norm[2]": ["1.414", "0"]}
    body = client.post("/api/check", json={"spec": example("qk-norm"), "claims": claims, "html": False}).json()
    assert [(c["quantity"], c["row"], c["col"], c["verdict"], c["expected"]) for c in body["claims"]] == [
        ("Q_rms", "tea", None, "wrong", "3.536"),
        ("K_rms", "like", None, "rounded", "1.414"),
        ("Q_norm", "tea", 1, "carried", "0.849"),
        ("Q_norm", "tea", 2, "carried", "1.131"),
        ("K_norm", "like", 1, "rounded", "1.414"),
        ("K_norm", "like", 2, "exact", "0"),
    ]


@pytest.mark.parametrize(
    "name, quantity, message",
    [
        ("seed", "angle", "spec: quantity: the hint of angle needs rope = true"),
        ("seed", "rms", "spec: quantity: the hint of rms needs qk_norm = true"),
    ],
)
def test_turn_and_norm_hint_errors(client, name, quantity, message):
    response = client.post("/api/hint", json={"spec": example(name), "quantity": quantity})
    assert response.status_code == 400 and response.json()["error"] == message


def cross(lang: str = "en") -> dict:
    """The rope example's queries against three keys of their own, at rows 0, 1, 2 (no positions given)."""
    K = [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 1, 1]]
    return {**example("rope", lang), "key_tokens": ["x", "y", "z"], "K": K, "V": [[1, 0], [0, 1], [1, 1]]}


def test_a_turn_in_cross_attention_without_positions_is_refused(client):
    response = client.post("/api/hint", json={"spec": cross(), "quantity": "scores"})
    assert response.json()["error"] == (
        "spec: positions: practice mode turns Q and K in cross-attention only where the spec gives positions (else "
        "the keys' angles are claimed by the queries' rows); check them in the check tab"
    )


# the rope example's four queries at positions 4..7 against their keys at 0..3 (a KV cache's prompt)
PLACED = {**example("rope"), "positions": [4, 5, 6, 7]}


def placed_hint(client, quantity: str, claims: dict, lang: str = "en") -> str:
    spec = {**PLACED, "lang": lang}
    response = client.post("/api/hint", json={"spec": spec, "quantity": quantity, "claims": claims})
    assert response.status_code == 200, response.json()
    return response.json()["html"]


def test_at_given_positions_the_queries_and_the_keys_angles_are_their_own(client):
    angles = placed_hint(client, "angle", {})
    assert "\\varphi_{\\text{the},1} &amp;= 4 \\cdot \\theta_{1} \\\\\n" in angles  # query "the" at 4
    assert "\\varphi^{K}_{\\text{the},1} &amp;= 0 \\cdot \\theta_{1} \\\\\n" in angles  # key "the" at 0
    assert angles.endswith("\\varphi^{K}_{\\text{down},2} &amp;= 3 \\cdot \\theta_{2}\n\\end{aligned}</div>\n")
    claims = {"rope_key_angle[2]": ["5.1", "1"], "rope_angle[4]": ["7", "0.07"], "rope_key_cos[1]": ["0.5", "0.9"]}
    trig = placed_hint(client, "trig", claims)
    assert (
        "\\cos\\varphi_{\\text{down},2} &amp;= \\cos\\bigl( 0.07 \\bigr),\\quad "
        "\\sin\\varphi_{\\text{down},2} = \\sin\\bigl( 0.07 \\bigr) \\\\\n"
    ) in trig
    assert (
        "\\cos\\varphi^{K}_{\\text{cat},1} &amp;= \\cos\\bigl( 5.1 \\bigr),\\quad "
        "\\sin\\varphi^{K}_{\\text{cat},1} = \\sin\\bigl( 5.1 \\bigr) \\\\\n"
    ) in trig
    keys = placed_hint(client, "K_rot", claims)
    assert keys.startswith(
        "<p>Turn each pair (a, b) of every key with your cos and sin of that key (at its own position), "
        "(a cos − b sin, a sin + b cos):</p>\n"
        '<div class="math display">\\begin{aligned}\n'
        "K'_{\\text{the},1} &amp;= 1\\times 0.5 - 0\\times \\square \\\\\n"
        "K'_{\\text{the},3} &amp;= 1\\times \\square + 0\\times 0.5 \\\\\n"
        "K'_{\\text{the},2} &amp;= 1\\times 0.9 - 1\\times \\square \\\\\n"
    )
    assert placed_hint(client, "K_rot", {}, "zh").startswith(
        "<p>用你算的那个键自己（在它自己的位置上）的 cos 和 sin 旋转每个键的每一对 (a, b)，即 (a cos − b sin, a sin + b cos)：</p>"
    )


TURN_CLAIMS = {"rope_angle[2]": ["-0.5"], "rope_cos[2]": ["-0.4"]}
CASES = [
    ("rope-angles", "en", ("angle", "trig", "Q_rot", "K_rot", "scores"), TURN_CLAIMS),
    ("rope", "zh", ("angle", "trig", "Q_rot", "K_rot", "scores"), {"rope_angle[2]": ["-0.5", "1"]}),
    ("qk-norm", "zh", ("rms", "Q_norm", "K_norm", "scores"), {"Q_rms[3]": "3.5", "K_rms[1]": "1"}),
    ("mla-rope", "en", ("Q", "angle", "trig", "Q_rot", "K_rot", "absorbed"), TURN_CLAIMS),
]


def _displays(text: str) -> str:
    """A hint's displayed math as Markdown, for KaTeX."""
    import html as html_

    return "".join(
        f"$$\n{html_.unescape(part.split('</div>')[0])}\n$$\n" for part in text.split('<div class="math display">')[1:]
    )


@pytest.mark.parametrize("name, lang, quantities, claims", CASES)
def test_every_new_hint_parses_in_katex(client, katex, name, lang, quantities, claims):
    import html as html_

    from .conftest import math_spans

    for quantity in quantities:
        markdown = _displays(hint(client, name, quantity, claims, lang))
        assert math_spans(markdown) and katex(markdown) == [], (name, quantity)
    naive = {**example("mla-rope"), "mla_route": "naive"}
    for quantity in ("K", "scores"):
        text = client.post("/api/hint", json={"spec": naive, "quantity": quantity}).json()["html"]
        tex = html_.unescape(text.split('<div class="math display">')[1].split("</div>")[0])
        assert katex(f"$$\n{tex}\n$$\n") == []


# --- the rounds in Chromium ---------------------------------------------------------------------------------

STEPS = {
    "rope-angles": {
        "en": [
            "Compute the angle φ = p θ_t of every token's pairs: its position p times each pair's frequency θ_t.",
            "Compute cos φ and sin φ of every token's angles.",
            "Turn the query of “tea” by its angles: compute Q′.",
            "Turn the key of every token by its angles: compute K′.",
            "Compute the score S of “tea”.",
        ],
        "zh": [
            "计算每个词元每一对的角度 φ = p θ_t：它的位置 p 乘以这一对的频率 θ_t。",
            "计算每个词元各角度的 cos φ 与 sin φ。",
            "按角度旋转「茶」的查询：计算 Q′。",
            "按角度旋转每个词元的键：计算 K′。",
            "计算「茶」的分数 S。",
        ],
    },
    "qk-norm": {
        "en": [
            "Compute σ = √(mean(x²) + ε) of the query row of “tea” and of every key row.",
            "Compute the normalized query of “tea”: q / σ (times the scale w where the spec gives one).",
            "Compute the normalized key of every token: k / σ (times the scale w where the spec gives one).",
            "Compute the score S of “tea”.",
        ],
        "zh": [
            "计算「茶」的查询行和每个键行的 σ = √(mean(x²) + ε)。",
            "计算「茶」归一化后的查询：q / σ（规格给出缩放 w 时再乘以 w）。",
            "计算每个词元归一化后的键：k / σ（规格给出缩放 w 时再乘以 w）。",
            "计算「茶」的分数 S。",
        ],
    },
}


def _questions(driver, count: int) -> list[str]:
    out = [_text(driver, "practice-question")]
    for _ in range(count - 1):
        driver.find_element("id", "practice-next").click()
        wait(driver, lambda: _text(driver, "practice-question") != out[-1], what="the next step")
        out.append(_text(driver, "practice-question"))
    return out


@pytest.mark.parametrize("name", STEPS)
def test_the_steps_before_the_scores(page, server, name):
    driver, lang = page
    _open(driver, server, name, lang)
    total = {"rope-angles": 10, "qk-norm": 9}[name]
    progress = {"en": f"Step 1 of {total}", "zh": f"第 1 步，共 {total} 步"}[lang]
    wait(driver, lambda: _text(driver, "practice-progress") == progress, what=progress)
    assert _questions(driver, len(STEPS[name][lang])) == STEPS[name][lang]


CAPTIONS = {
    "en": ["I: cos, pair 1", "I: sin, pair 1", "like: cos, pair 1", "like: sin, pair 1", "tea: cos, pair 1"],
    "zh": ["我：cos，第 1 对", "我：sin，第 1 对", "爱：cos，第 1 对", "爱：sin，第 1 对", "茶：cos，第 1 对"],
}


def test_a_wrong_angle_is_carried_into_cos_and_sin(page, server):
    driver, lang = page
    _open(driver, server, "rope-angles", lang)
    # φ = p · 30°: 0, π/6 ≈ 0.524, π/3 ≈ 1.047; 0.7 is wrong
    angles = {"practice-rope_angle-r1": ["0"], "practice-rope_angle-r2": ["0.7"], "practice-rope_angle-r3": ["1.047"]}
    verdicts = {"practice-rope_angle-r1": ["exact"], "practice-rope_angle-r2": ["wrong"]}
    _answer(driver, angles, {**verdicts, "practice-rope_angle-r3": ["rounded"]})
    driver.find_element("id", "practice-next").click()
    wait(driver, lambda: driver.find_elements("id", "practice-rope_cos-r1-0-input"), what="cos and sin")
    captions = [c.text for c in driver.find_elements("css selector", "#practice-boxes .caption")]
    assert captions[:5] == CAPTIONS[lang]
    # cos 0.7 = 0.765, sin 0.7 = 0.644: carried from the wrong angle, not right
    trig = {
        "practice-rope_cos-r1": ["1"],
        "practice-rope_sin-r1": ["0"],
        "practice-rope_cos-r2": ["0.765"],
        "practice-rope_sin-r2": ["0.644"],
        "practice-rope_cos-r3": ["0.5"],
        "practice-rope_sin-r3": ["0.866"],
    }
    expected = {box: ["exact"] for box in trig}
    _answer(
        driver,
        trig,
        {
            **expected,
            "practice-rope_cos-r2": ["carried"],
            "practice-rope_sin-r2": ["carried"],
            "practice-rope_sin-r3": ["rounded"],
        },
    )
    assert "tone-carried" in driver.find_element("id", "practice-rope_cos-r2-0").get_attribute("class")
    driver.find_element("id", "practice-hint").click()
    tex = wait(driver, lambda: _annotations(driver, "#practice-hint-text"), what="the hint")
    assert "\\cos\\varphi_{\\text{" in tex and "\\cos\\bigl( 0.7 \\bigr)" in tex
    # revealed, the turn stops at Q′: K′ is the next step's answer
    driver.find_element("id", "practice-reveal").click()
    shown = wait(driver, lambda: _annotations(driver, "#practice-step"), what="the turn revealed")
    assert "Q'=" in shown and "K'=" not in shown and "K'\\approx" not in shown
    # Q′ of "tea" from the right cos and sin of its row: (1·0.5 − 1·0.866, 1·0.866 + 1·0.5)
    driver.find_element("id", "practice-next").click()
    _answer(driver, {"practice-Q_rot": ["-0.366", "1.366"]}, {"practice-Q_rot": ["rounded", "rounded"]})


def _annotations(driver, where: str) -> str:
    script = f"return Array.from(document.querySelectorAll('{where} annotation')).map(a => a.textContent).join(' ')"
    return driver.execute_script(script)


def test_a_wrong_sigma_is_carried_into_the_normalized_keys(page, server):
    driver, lang = page
    _open(driver, server, "qk-norm", lang)
    # σ of K's first row [1, 1] is √(1 + 10⁻⁶) ≈ 1.000; 1.414 forgets the mean
    sigmas = {
        "practice-Q_rms": ["3.536"],
        "practice-K_rms-r1": ["1.414"],
        "practice-K_rms-r2": ["1.414"],
        "practice-K_rms-r3": ["2.121"],
    }
    _answer(
        driver,
        sigmas,
        {
            "practice-Q_rms": ["rounded"],
            "practice-K_rms-r1": ["wrong"],
            "practice-K_rms-r2": ["rounded"],
            "practice-K_rms-r3": ["rounded"],
        },
    )
    for _ in range(2):
        driver.find_element("id", "practice-next").click()
    # k̂ of "I" from the student's σ: 1 / 1.414 = 0.707 (exact 1.000): carried
    keys = {"practice-K_norm-r1": ["0.707", "0.707"]}
    _answer(driver, keys, {"practice-K_norm-r1": ["carried", "carried"]})
    driver.find_element("id", "practice-hint").click()
    tex = wait(driver, lambda: _annotations(driver, "#practice-hint-text"), what="the hint")
    assert "\\hat{k}_{\\text{" in tex and "\\frac{1}{1.414}" in tex


def test_mla_with_decoupled_dims_turns_them_before_the_absorbed_query(page, server):
    driver, lang = page
    _open(driver, server, "mla-rope", lang)
    # the latent, the query, the angles, cos and sin, Q′, K′, q̃ with its scores, then the softmax and u, o
    progress = {"en": "Step 1 of 12", "zh": "第 1 步，共 12 步"}[lang]
    wait(driver, lambda: _text(driver, "practice-progress") == progress, what="12 steps")
    for _ in range(4):
        driver.find_element("id", "practice-next").click()
    wait(driver, lambda: driver.find_elements("id", "practice-Q_rot-0-input"), what="Q′")
    captions = [c.text for c in driver.find_elements("css selector", "#practice-boxes .caption")]
    assert captions == {"en": ["column 3", "column 4"], "zh": ["第 3 列", "第 4 列"]}[lang]
    # q_R of "sat" = [1, 1] turned by 2 rad: (cos 2 − sin 2, sin 2 + cos 2) ≈ (−1.325, 0.493)
    _answer(driver, {"practice-Q_rot": ["-1.325", "0.939"]}, {"practice-Q_rot": ["rounded", "wrong"]})


REFUSED = {
    "en": "Practice mode turns Q and K in cross-attention only where the spec gives the positions (else the keys' "
    "angles are claimed by the queries' rows); check these numbers in the tab “Check my numbers”.",
    "zh": "交叉注意力中，练习模式只在规格给出位置时旋转 Q 和 K（否则键的角度要按查询的行来写）；"
    "请在「核对我的数」页核对这些数。",
}


def _open_spec(driver, server, spec: dict) -> None:
    import base64
    import json

    from .test_serve_live import forget

    state = {"spec": spec, "claims": {}, "tab": "practice", "row": "focus", "practice": {"step": 0}}
    forget(driver, server)
    driver.get(f"{server}#j=" + base64.urlsafe_b64encode(json.dumps(state).encode()).decode().rstrip("="))


def test_a_turn_in_cross_attention_without_positions_shows_no_step(page, server):
    driver, lang = page
    _open_spec(driver, server, cross(lang))
    wait(driver, lambda: _text(driver, "practice-error") == REFUSED[lang], what="the refusal")
    assert driver.find_elements("css selector", "#practice-boxes .box") == []
    assert not driver.find_element("id", "practice-hint").is_enabled()


KEY_CAPTIONS = {
    "en": ["key the, pair 1", "key the, pair 2", "key cat, pair 1", "key cat, pair 2"],
    "zh": ["键「小猫」，第 1 对", "键「小猫」，第 2 对", "键「坐」，第 1 对", "键「坐」，第 2 对"],
}
KEY_TRIG_CAPTIONS = {
    "en": ["key the: cos, pair 1", "key the: cos, pair 2", "key the: sin, pair 1", "key the: sin, pair 2"],
    "zh": [
        "键「小猫」：cos，第 1 对",
        "键「小猫」：cos，第 2 对",
        "键「小猫」：sin，第 1 对",
        "键「小猫」：sin，第 2 对",
    ],
}


def test_at_given_positions_the_round_asks_the_keys_angles_and_carries_them_into_k(page, server):
    driver, lang = page
    _open_spec(driver, server, {**example("rope", lang), "positions": [4, 5, 6, 7]})
    # the angles, cos and sin, Q′, K′, the scores and the softmax's five steps
    progress = {"en": "Step 1 of 10", "zh": "第 1 步，共 10 步"}[lang]
    wait(driver, lambda: _text(driver, "practice-progress") == progress, what=progress)
    wait(driver, lambda: driver.find_elements("id", "practice-rope_key_angle-r1-0-input"), what="the keys' angles")
    captions = [c.text for c in driver.find_elements("css selector", "#practice-boxes .caption")]
    assert captions[8:12] == KEY_CAPTIONS[lang]  # after the four queries' two pairs
    # query "the" sits at 4, key "cat" at 1: θ = (1, 0.01); 0.03 is wrong for the key
    boxes = {"practice-rope_angle-r1": ["4", "0.04"], "practice-rope_key_angle-r2": ["1", "0.03"]}
    expected = {"practice-rope_angle-r1": ["exact", "exact"], "practice-rope_key_angle-r2": ["exact", "wrong"]}
    _answer(driver, boxes, expected)
    driver.find_element("id", "practice-next").click()
    wait(driver, lambda: driver.find_elements("id", "practice-rope_key_cos-r1-0-input"), what="the keys' cos and sin")
    captions = [c.text for c in driver.find_elements("css selector", "#practice-boxes .caption")]
    assert [c for c in captions if c.startswith(("key ", "键"))][:4] == KEY_TRIG_CAPTIONS[lang]
    # cos and sin of key "cat" from the student's 0.03, not the exact 0.01: carried
    trig = {"practice-rope_key_cos-r2": ["0.540", "1.000"], "practice-rope_key_sin-r2": ["0.841", "0.030"]}
    _answer(
        driver,
        trig,
        {"practice-rope_key_cos-r2": ["rounded", "rounded"], "practice-rope_key_sin-r2": ["rounded", "carried"]},
    )


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_hints_at_given_positions_parse_in_katex(client, katex, lang):
    from .conftest import math_spans

    claims = {"rope_key_angle[2]": ["-0.5", "1"], "rope_key_cos[1]": ["0.5", "0.9"], "rope_cos[4]": ["0.7", "1"]}
    for quantity in ("angle", "trig", "Q_rot", "K_rot", "scores"):
        markdown = _displays(placed_hint(client, quantity, claims, lang))
        assert math_spans(markdown) and katex(markdown) == [], quantity


# mla-rope's step 6 revealed: the turn down to K′, not the Q′K′ᵀ line after it (the scores' answers)
REVEALED_TURN = (
    "Q, K p p\\,\\theta_t \\theta_t = 10000^{-2(t-1)/d_r} = 10000^{-(t-1)},\\ t = 1 10000 d_r = 2 "
    "(d_{nope} + t,\\ d_{nope} + t + d_r/2) d_r = 2 \\begin{aligned}\n"
    "&t = 1:\\ \\varphi = 2 \\cdot \\theta_{1} = 2,\\quad \\cos\\varphi \\approx -0.416,\\quad \\sin\\varphi \\approx 0.909 \\\\\n"
    "&\\quad q'_{3} = q_{3}\\cos\\varphi - q_{4}\\sin\\varphi \\\\\n"
    "&\\qquad = 1 \\times \\left(-0.416\\right) - 1 \\times 0.909 = -1.325 \\\\\n"
    "&\\quad q'_{4} = q_{3}\\sin\\varphi + q_{4}\\cos\\varphi \\\\\n"
    "&\\qquad = 1 \\times 0.909 + 1 \\times \\left(-0.416\\right) = 0.493\n"
    "\\end{aligned} Q' K' "
    "Q'=\\begin{bmatrix}1.000 & 0.000 & 1.000 & 0.000 \\\\ 0.000 & 1.000 & -0.841 & 0.540 \\\\ "
    "1.000 & 1.000 & -1.325 & 0.493\\end{bmatrix} "
    "K'=\\begin{bmatrix}2.000 & 0.500 & 0.000 & 1.000 \\\\ 2.000 & 1.500 & 0.540 & 0.841 \\\\ "
    "2.000 & 1.000 & -1.325 & 0.493\\end{bmatrix}"
)


def _open_mla_rope_at(driver, server: str, lang: str, step: int) -> None:
    """The mla-rope example's practice round, opened at ``step`` (1-based) through the page's URL fragment."""
    import base64
    import json

    from .test_serve import forget

    state = {"spec": example("mla-rope", lang), "claims": {}, "tab": "practice", "practice": {"step": step - 1}}
    fragment_ = base64.urlsafe_b64encode(json.dumps({**state, "row": "focus"}).encode()).decode().rstrip("=")
    forget(driver, server)
    driver.get(f"{server}#j={fragment_}")
    progress = {"en": f"Step {step} of 12", "zh": f"第 {step} 步，共 12 步"}[lang]
    wait(driver, lambda: _text(driver, "practice-progress") == progress, what=progress)


def test_the_keys_turn_is_revealed_to_k_not_to_the_scores(page, server):
    driver, lang = page
    _open_mla_rope_at(driver, server, lang, 6)
    # K′'s decoupled dims: k_R = X W_KR turned by 0, 1 and 2 radians
    keys = {
        "practice-K_rot-r1": ["0", "1"],
        "practice-K_rot-r2": ["0.540", "0.841"],
        "practice-K_rot-r3": ["-1.325", "0.493"],
    }
    verdicts = {"practice-K_rot-r1": ["exact", "exact"]}
    _answer(driver, keys, {**verdicts, "practice-K_rot-r2": ["rounded"] * 2, "practice-K_rot-r3": ["rounded"] * 2})
    driver.find_element("id", "practice-reveal").click()
    assert wait(driver, lambda: _annotations(driver, "#practice-step"), what="the keys' turn revealed") == REVEALED_TURN
    assert _text(driver, "practice-step").endswith(
        "K\n′\n=\n2.000\n2.000\n2.000\n0.500\n1.500\n1.000\n0.000\n0.540\n−1.325\n1.000\n0.841\n0.493"
    )


ABSORBED_TURNED = {
    "en": "Compute the absorbed query of “sat” (its q times the transpose of W_UK), then its score against each latent row "
    "c_KV plus its turned q′_R times that token's turned k′_R.",
    "zh": "计算「下」吸收后的查询（q 乘 W_UK 的转置），再算它与每个潜在向量 c_KV 的分数，并加上它旋转后的 q′_R 与该词元旋转后的 "
    "k′_R 之积。",
}


def test_the_absorbed_question_names_the_turned_term_where_the_dims_are_decoupled(page, server):
    driver, lang = page
    _open_mla_rope_at(driver, server, lang, 7)
    wait(driver, lambda: _text(driver, "practice-question") == ABSORBED_TURNED[lang], what=ABSORBED_TURNED[lang])
