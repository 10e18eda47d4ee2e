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
