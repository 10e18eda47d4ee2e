"""The wording the teacher's and the author's trials of issue 32 found: a text report's title without TeX, a block
of one key's hint without a sum over one term."""

from __future__ import annotations

import pytest

from symattn.checking.checker import check
from symattn.input import builtin
from symattn.input.files import read_table
from symattn.input.spec import load_spec
from symattn.input.titlemath import plain_title
from symattn.rendering.renderer import render_report

pytest.importorskip("starlette", reason="the practice hint is the page's (the web extra)")

from starlette.testclient import TestClient  # noqa: E402

from symattn.web.app import create_app  # noqa: E402

from .test_serve import as_json  # noqa: E402


@pytest.mark.parametrize(
    "lang, first",
    [
        ("en", "Checking hand-computed numbers: MLA with 2 heads: one latent c_KV for both\n"),
        ("zh", "手算结果核对：2 个头的 MLA：两个头共用一个潜在向量 c_KV\n"),
    ],
)
def test_a_text_reports_title_writes_its_math_out(lang, first):
    report = check(load_spec(builtin.example_path("mla-heads", lang)), {"claims": {"latent[1][1]": "1.5"}})
    assert render_report(report, "text").startswith(first)


@pytest.mark.parametrize(
    "title, plain",
    [("$c_{KV}$ and $W_{UK}^\\top$", "c_KV and W_UKᵀ"), ("$x_{i+1}$", "x_{i+1}"), ("$x_{i j}$", "x_{i j}")],
)
def test_a_plain_title_braces_a_script_only_where_it_is_more_than_a_name(title, plain):
    assert plain_title(title) == plain


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(hosts=("testserver",)), raise_server_exceptions=True) as c:
        yield c


def test_the_hint_of_a_block_of_one_key_adds_its_one_term(client):
    spec = as_json(read_table(builtin.example_path("flash", "en")))
    spec["block_keys"] = 3  # four keys: block 2 holds "tea" alone
    spec.pop("split_keys")
    claims = {"rows": {"tea": {"scaled": ["0.5", "-2", "1", "-0.5"]}}}
    response = client.post("/api/hint", json={"spec": spec, "quantity": "block", "block": 2, "claims": claims})
    html = response.json()["html"]
    assert "\\sum" not in html
    assert (
        "l_{2} &amp;= r_{2}\\,l_{1} + e^{z_{\\text{tea}} - m_{2}} = \\square\\times \\square + e^{-0.5 - \\square} \\\\\n"
        "\\mathrm{acc}_{2,1} &amp;= r_{2}\\,\\mathrm{acc}_{1,1} + e^{z_{\\text{tea}} - m_{2}} V_{\\text{tea},1} = "
        "\\square\\times \\square + e^{-0.5 - \\square}\\times 2 \\\\\n"
    ) in html


@pytest.mark.parametrize(
    "lang, shared, intro, agree, own",
    [
        (
            "en",
            "## The latent $c_{KV}$, shared by every head (MLA)",
            "Multi-head latent attention (DeepSeek-V2, V3)",
            "Both routes give the same output, exactly",
            "The head's own decoupled query part, $Q_R = X W_{QR}^{(h)}$ ($d_r = 2$); its key part $K_R = X W_{KR}$ is the "
            "one above, shared by every head:",
        ),
        (
            "zh",
            "## 各头共用的潜在向量 $c_{KV}$（MLA）",
            "多头潜在注意力（DeepSeek-V2、V3）",
            "两条路线的输出完全相同",
            "这个头自己的解耦查询部分 $Q_R = X W_{QR}^{(h)}$（$d_r = 2$）；键部分 $K_R = X W_{KR}$ 就是上面各头共用的那个：",
        ),
    ],
)
def test_what_the_heads_share_is_written_once_before_them(lang, shared, intro, agree, own):
    from symattn.derivation.derive import derive
    from symattn.rendering.renderer import render

    text = render(derive(load_spec(builtin.example_path("mla-heads", lang))), "markdown")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[1:4] == [shared, *headings[2:4]] and headings[2].startswith(("## Head 1", "## 第 1 个头"))
    before_heads, heads = text.split(headings[2])
    # X, W_DKV, c_KV, the shared K_R and the routes' proof: once, before the heads
    for once in (intro, agree, "c_{KV} = X W_{DKV} = \\begin{bmatrix}", "W_{KR}=\\begin{bmatrix}"):
        assert text.count(once) == 1 and once in before_heads, once
    # each head: its own blocks (W_Q, W_UK, W_UV, W_QR) and its absorbed query, no more
    # each head's blocks written W^{(h)}: head 2's W_UK is not head 1's
    assert all(heads.count(own.replace("(h)", f"({h})")) == 1 for h in (1, 2))
    assert [heads.count(f"W_{{UK}}^{{({h})}}=\\begin{{bmatrix}}") for h in (1, 2)] == [1, 1]
    assert heads.count("\\tilde{q} = \\begin{bmatrix}") == 2 and "X=\\begin{bmatrix}" not in heads
