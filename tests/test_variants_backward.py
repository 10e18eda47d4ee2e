"""The backward pass with ALiBi, softcap and sinks (issue 20): exact compute strings, the document's
step through the cap and the sink's gradient, KaTeX and TeX clean. The torch oracle is in
test_variants_backward_torch.py."""

import re

import pytest

from symattn.derivation.derive import derive
from symattn.derivation.intermediates import compute
from symattn.input import builtin
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render

SMALL = {"tokens": ["q"], "key_tokens": ["a", "b"], "Q": [["0"]], "K": [["1"], ["2"]], "V": [["1"], ["3"]]}
SMALL = {**SMALL, "backward": {"loss": "sum"}}


def test_sink_at_every_score_gives_exact_gradients():
    # every z = s = 0: each weight and the share are 1/3, r = 4/3, ds = −(1/3)(4/3)
    data = compute(load_spec({**SMALL, "sinks": ["0"]}), digits=6)["backward"]
    assert data["dZ"] == {"exact": [["-1/9", "5/9"]], "value": [["-0.111111", "0.555556"]]}
    assert data["dsinks"] == {"exact": [["-4/9"]], "value": [["-0.444444"]]}
    assert data["dV"]["exact"] == [["1/3"], ["1/3"]] and data["dQ"]["exact"] == [["1"]]


def test_softcap_gradient_through_tanh():
    data = compute(load_spec({**SMALL, "softcap": "2", "alibi_slopes": ["1"]}), digits=6)["backward"]
    # y = (0, −1): tanh′ is exactly 1 at y = 0
    assert data["tanh_prime"] == {"exact": [["1", "1 - tanh(1/2)**2"]], "value": [["1.00000", "0.786448"]]}
    assert data["dZ_pre"]["value"] == [["-0.406771", "0.319904"]]
    assert data["dS"]["value"] == data["dZ_pre"]["value"]  # scale 1 (d_k = 1)
    assert data["dQ"]["value"] == [["0.233037"]] and "dsinks" not in data


def test_alibi_gradients_use_the_biased_weights():
    data = compute(load_spec({**SMALL, "alibi_slopes": ["0.5"]}), digits=6)["backward"]
    assert data["dV"]["exact"] == [["1/(exp(-1/2) + 1)"], ["exp(-1/2)/(exp(-1/2) + 1)"]]
    assert data["dZ"]["value"] == [["-0.470007", "0.470007"]] and data["dQ"]["value"] == [["0.470007"]]
    assert list(data) == ["loss", "dO", "dV", "dA", "dZ", "dS", "dQ", "dK"]


def test_dsinks_per_head_and_head_quantities():
    raw = {
        "Q": [["1", "0", "0.5", "2"], ["0", "1", "1", "0"]],
        "K": [["1", "0.2", "0", "1"], ["0.1", "1", "1", "0"]],
        "V": [["1", "0"], ["0", "1"]],
        "heads": 2,
        "sinks": ["0.5", "-1"],
        "softcap": "3",
        "backward": {"loss": "sum"},
    }
    data = compute(load_spec(raw), digits=4)["backward"]
    assert len(data["dsinks"]["value"]) == 1 and len(data["dsinks"]["value"][0]) == 2
    assert list(data["heads"][0]) == ["dO", "dV", "dA", "dZ", "tanh_prime", "dZ_pre", "dS", "dQ", "dK"]


def test_document_steps_through_the_cap_and_the_sink():
    spec = load_spec({**SMALL, "softcap": "2", "sinks": ["0"], "lang": "en"})
    text = render(derive(spec), "markdown")
    assert "## Backward: through the soft-cap ($dY$)" in text
    assert "dY_{\\text{q},\\text{a}} &\\approx \\left(-0.111\\right) \\times 1 \\approx -0.111" in text
    assert "## Backward: the sink's own gradient ($ds$)" in text
    assert "## Backward 4: the scaling $dS = dY / \\sqrt{d_k}$" in text
    assert "\\end{bmatrix}\n$$\n\n## Backward: the sink" in text
    zh = render(derive(load_spec({**SMALL, "softcap": "2", "sinks": ["0"], "lang": "zh"})), "markdown")
    assert "## 反向：穿过软上限（$dY$）" in zh and "## 反向：汇点自己的梯度（$ds$）" in zh


@pytest.mark.parametrize("rounding", ["exact", "hand"])
def test_hand_rounding_runs_through_the_variants(rounding):
    # by hand, tanh′ and the share are taken to the weights' decimals, then each step from the shown numbers
    raw = {**_raw("softcap"), "sinks": ["0.5"], "rounding": rounding, "expand": "all", "backward": {"loss": "sum"}}
    text = render(derive(load_spec(raw)), "markdown")
    assert "Backward: through the soft-cap" in text and "Backward: the sink's own gradient" in text


def _raw(name):
    import tomllib

    with open(builtin.example_path(name, "en"), "rb") as f:
        return tomllib.load(f)


@pytest.mark.client
@pytest.mark.parametrize("name", ["alibi", "softcap", "sinks"])
def test_backward_documents_of_the_variants_compile(katex, latex, tmp_path, name):
    spec = load_spec(builtin.example_path(name, "en")).with_options(backward=True)
    derivation = derive(spec)
    assert katex(render(derivation, "markdown")) == []
    latex(render(derivation, "latex", standalone=True), "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log) == []


@pytest.mark.client
def test_every_variant_backward_in_chinese_compiles(katex, latex, tmp_path):
    raw = {**_raw("sinks"), "lang": "zh", "softcap": "1.5", "alibi": True, "backward": {"loss": "sum"}}
    raw.pop("title", None)
    spec = load_spec(raw).with_options(expand="all")
    derivation = derive(spec)
    assert katex(render(derivation, "markdown")) == []
    latex(render(derivation, "latex", standalone=True), "xelatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log) == []


def test_check_carries_a_claimed_dZ_through_the_cap():
    from symattn.checking.checker import check

    spec = load_spec({**SMALL, "softcap": "2", "alibi_slopes": ["1"]})
    # dZ = (−0.406771, 0.406771), tanh′ = (1, 0.786448): a wrong dZ of 0.55 carries to dS = 0.55 × 0.786448
    claims = {"dZ[1][2]": "0.55", "dS[1][2]": "0.4325", "dS[1][1]": "-0.4068"}
    report = check(spec, {"claims": claims})
    assert [(r.claim.key, r.verdict) for r in report.results] == [
        ("claims.dZ[1][2]", "wrong"),
        ("claims.dS[1][1]", "rounded"),
        ("claims.dS[1][2]", "carried"),
    ]


def test_check_dsinks_claims():
    from symattn.checking.checker import check

    spec = load_spec(builtin.example_path("sinks", "en")).with_options(backward=True)
    assert compute(spec, digits=6)["backward"]["dsinks"]["value"] == [["-6.08698"]]
    # r of "sat" claimed as 5 (rounded, 5.306): ds from it is −(0.44841·5.51592 + 0.34144·6.58561 + 0.25727·5) = −6.008
    report = check(spec, {"claims": {"rows": {"sat": {"rowsum": "5"}}, "dsinks": "-6.008"}})
    assert [(r.claim.key, r.verdict) for r in report.results] == [
        ("claims.rows.sat.rowsum", "rounded"),
        ("claims.dsinks", "carried"),
    ]
    assert check(spec, {"claims": {"dsinks": "-6.087"}}).results[0].verdict == "rounded"
    wrong = check(spec, {"claims": {"dsinks": "-4.5"}}).results[0]
    assert wrong.verdict == "wrong"  # explained as Σ share × (−r)
    assert [(str(a.value), str(b.value)) for a, b in wrong.explanation.operands][0] == ("0.448408", "-5.51592")


def test_check_dsinks_per_head_and_refusals():
    from symattn.checking.checker import check
    from symattn.input.errors import SpecError

    raw = {
        "Q": [["1", "0", "0.5", "2"], ["0", "1", "1", "0"]],
        "K": [["1", "0.2", "0", "1"], ["0.1", "1", "1", "0"]],
        "V": [["1", "0"], ["0", "1"]],
        "heads": 2,
        "sinks": ["0.5", "-1"],
        "backward": {"loss": "sum"},
    }
    spec = load_spec(raw)
    assert compute(spec, digits=6)["backward"]["dsinks"]["value"] == [["-0.229646", "-0.0797177"]]
    report = check(spec, {"claims": {"h1.dsinks": "-0.2296", "h2.dsinks": "0.5"}})
    assert [(r.claim.key, r.verdict) for r in report.results] == [
        ("claims.h1.dsinks", "rounded"),
        ("claims.h2.dsinks", "wrong"),
    ]
    with pytest.raises(SpecError, match=r"^<dict>: claims\.dsinks: dsinks is claimed per head: h1\.dsinks to h2"):
        check(spec, {"claims": {"dsinks": "1"}})
    plain = load_spec({k: v for k, v in raw.items() if k != "sinks"})
    with pytest.raises(SpecError, match=r"^<dict>: claims\.h1\.dsinks: claims on dsinks need sinks$"):
        check(plain, {"claims": {"h1.dsinks": "1"}})


@pytest.mark.parametrize("lang, name", [("en", "gradient $ds$ of the sink logit"), ("zh", "汇点分数的梯度 $ds$")])
def test_report_names_dsinks(lang, name):
    from symattn.checking.checker import check
    from symattn.rendering.renderer import render_report

    spec = load_spec(builtin.example_path("sinks", lang)).with_options(backward=True)
    text = render_report(check(spec, {"claims": {"dsinks": "-4.5"}}), "markdown")
    assert f"| 1 | {name} |  |  | -4.5 | -6.08698 |" in text
