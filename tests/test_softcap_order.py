"""Softcap with ALiBi: the order (kmisc6). ``softcap_order`` says where the cap acts beside ALiBi's bias:
"before-bias" (FlashAttention's kernels and attention_ref: c·tanh(s/c) − m·d, the API's default) or
"after-bias" (c·tanh((s − m·d)/c), a spec's default, the only one of the exact model). Every report, derivation
and certificate where both are on names it; a certificate binds it. Each order against torch float64."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from symattn.input.errors import SpecError
from tests.test_certificate_softcap import spec_with_cap
from tests.test_certificate_v3 import fast, forge
from tests.test_certificate_variants import agree, certify
from tests.test_compare_layouts import compare as run_compare
from tests.test_compare_layouts import write

torch = pytest.importorskip("torch")
SLOPES = [0.5, 0.25]
CAP = 2.0
BEFORE = (
    'Softcap and ALiBi: the scores are capped, then biased (softcap_order = "before-bias", FlashAttention\'s '
    "order): z = c·tanh(s/c) − m·d."
)
AFTER = (
    'Softcap and ALiBi: the scores are biased, then capped (softcap_order = "after-bias", a spec\'s derivation '
    "order): z = c·tanh((s − m·d)/c)."
)
REFUSED = (
    "softcap_order: expected 'before-bias' (FlashAttention's: the cap, then ALiBi's bias) or 'after-bias' (the "
    "bias, then the cap), got 'first'"
)


def reference(q, k, v, order, slopes=SLOPES, cap=CAP):
    """torch float64 attention of (B, H, N, D) tensors with a cap and ALiBi's −m·|i − j| in ``order``."""
    q, k, v = (t.double() for t in (q, k, v))
    n, m = q.shape[2], k.shape[2]
    z = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    bias = (
        torch.tensor(slopes, dtype=torch.float64)[:, None, None]
        * (torch.arange(n)[:, None] - torch.arange(m)[None, :]).abs()
    )
    z = cap * torch.tanh(z / cap) - bias if order == "before-bias" else cap * torch.tanh((z - bias) / cap)
    return torch.softmax(z, -1) @ v


@pytest.fixture(scope="module")
def inputs():
    gen = torch.Generator().manual_seed(3)
    return tuple(3 * torch.randn(1, 2, 8, 4, generator=gen) for _ in range(3))


@pytest.mark.parametrize("order", ["before-bias", "after-bias"])
def test_each_order_is_torch_float64_s_and_not_the_other_s(inputs, order):
    from symattn.kernel import compare

    q, k, v = inputs
    other = "after-bias" if order == "before-bias" else "before-bias"
    out = reference(q, k, v, order).float()
    tight = {"rule": "allclose", "rtol": 1.2e-7, "atol": 1e-13, "softcap": CAP, "alibi_slopes": SLOPES}
    report = compare(out, q, k, v, softcap_order=order, **tight)
    assert report.ok
    assert report.text().splitlines()[2] == (BEFORE if order == "before-bias" else AFTER)
    assert json.loads(report.to_json())["softcap_order"] == order
    assert not compare(out, q, k, v, softcap_order=other, **tight).ok
    assert not compare(reference(q, k, v, other).float(), q, k, v, softcap_order=order, **tight).ok


def test_the_api_takes_flashattentions_order_by_default(inputs):
    from symattn.kernel import compare
    from symattn.testing import assert_attention_close

    q, k, v = inputs
    out = reference(q, k, v, "before-bias").float()
    both = {"softcap": CAP, "alibi_slopes": SLOPES}
    assert (
        compare(out, q, k, v, **both).to_json() == compare(out, q, k, v, softcap_order="before-bias", **both).to_json()
    )
    assert_attention_close(out, q, k, v, **both)
    with pytest.raises(AssertionError) as info:  # FlashAttention's output against the spec's order
        assert_attention_close(out, q, k, v, softcap_order="after-bias", **both)
    assert f"\n{AFTER}\n" in str(info.value)


def test_the_order_is_named_only_where_both_act(inputs):
    from symattn.kernel import compare

    q, k, v = inputs
    for options in ({"softcap": CAP}, {"alibi_slopes": SLOPES}, {}):
        report = compare(q, q, k, v, softcap_order="after-bias", **options)
        assert "softcap_order" not in report.text() and "softcap_order" not in report.to_json()
    zh = compare(q, q, k, v, softcap=CAP, alibi_slopes=SLOPES).text("zh").splitlines()[2]
    assert zh == (
        '软上限与 ALiBi：先对分数封顶，再加偏置（softcap_order = "before-bias"，FlashAttention 的顺序）：'
        "z = c·tanh(s/c) − m·d。"
    )


@pytest.mark.parametrize("value", ["first", 1, None])
def test_a_bad_order_is_one_line(inputs, value):
    from symattn.kernel import compare

    q, k, v = inputs
    if value is None:  # None is the default
        assert compare(q, q, k, v, softcap_order=None, softcap=CAP).ok is True
        return
    with pytest.raises(SpecError) as info:
        compare(q, q, k, v, softcap_order=value, softcap=CAP)
    assert str(info.value) == (REFUSED if value == "first" else REFUSED.replace("'first'", "1"))


def spec_lines(order=None):
    lines = ['Q = "q.npy"', 'K = "k.npy"', 'V = "v.npy"', "softcap = 2", "alibi_slopes = [0.5, 0.25]"]
    return lines + ([] if order is None else [f'softcap_order = "{order}"'])


@pytest.mark.parametrize("order", [None, "before-bias", "after-bias"])
def test_a_spec_takes_the_key_on_the_float64_path(tmp_path, capsys, inputs, order):
    """A spec's default is its derivation's order, after the bias; its key gives FlashAttention's."""
    q, k, v = inputs
    taken = order or "after-bias"
    out = reference(q, k, v, taken).float()
    spec = write(tmp_path, spec_lines(order), q=q, k=k, v=v, o=out)
    code, text, err = run_compare(capsys, spec, tmp_path / "o.npy", "--rtol", "1.2e-7", "--atol", "1e-13")
    assert (code, err) == (0, "")
    assert text.splitlines()[2] == (BEFORE if taken == "before-bias" else AFTER)
    code, text, _ = run_compare(capsys, spec, tmp_path / "o.npy", "--format", "json")
    assert json.loads(text)["softcap_order"] == taken
    other = reference(q, k, v, "before-bias" if taken == "after-bias" else "after-bias").float()
    np.save(tmp_path / "o.npy", other.numpy())
    assert run_compare(capsys, spec, tmp_path / "o.npy", "--rtol", "1.2e-7", "--atol", "1e-13")[0] == 1


def test_the_exact_model_refuses_flashattentions_order_in_one_line(tmp_path, capsys):
    from symattn.cli.commands import main

    lines = ["Q = [[1, 2], [3, 4]]", "K = [[1, 0], [0, 1]]", "V = [[1, 2], [3, 4]]", "softcap = 2"]
    cases = [
        (
            [*lines, "alibi_slopes = [0.5]", 'softcap_order = "before-bias"'],
            "softcap_order: 'before-bias' "
            "(FlashAttention's order: the cap, then ALiBi's bias) is taken by symattn compare on the float64 path "
            "(float32 inputs) and by --certify --float64; the exact model applies the bias, then the cap "
            "('after-bias')",
        ),
        (
            [*lines[:3], 'softcap_order = "after-bias"'],
            "softcap_order: only with softcap: it says where the cap acts beside ALiBi's bias",
        ),
        ([*lines, "softcap_order = 1"], REFUSED.replace("'first'", "1")),
    ]
    for spec, message in cases:
        (tmp_path / "s.toml").write_text("\n".join(spec) + "\n")
        assert main(["render", str(tmp_path / "s.toml"), "-o", str(tmp_path / "s.md")]) == 2
        assert capsys.readouterr() == ("", f"symattn: {tmp_path / 's.toml'}: {message}\n")
        assert not (tmp_path / "s.md").exists()
    # a cap alone: the order has nothing to order, and the derivation is the plain one
    (tmp_path / "s.toml").write_text("\n".join([*lines, 'softcap_order = "before-bias"']) + "\n")
    assert main(["render", str(tmp_path / "s.toml"), "-o", str(tmp_path / "s.md")]) == 0
    assert "softcap_order" not in (tmp_path / "s.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_derivation_names_the_order(tmp_path, lang):
    from symattn.cli.commands import main

    lines = ["Q = [[1, 2], [3, 4]]", "K = [[1, 0], [0, 1]]", "V = [[1, 2], [3, 4]]", "softcap = 2"]
    (tmp_path / "s.toml").write_text("\n".join([*lines, "alibi_slopes = [0.5]"]) + "\n")
    assert main(["render", str(tmp_path / "s.toml"), "--lang", lang, "-o", str(tmp_path / "s.md")]) == 0
    after = r"$z = c\tanh\!\left((s - m\,\lvert i - j\rvert)/c\right)$"
    before = r"$z = c\tanh(s/c) - m\,\lvert i - j\rvert$"
    said = {
        "en": f"The cap comes after ALiBi's bias: {after}, with $s$ the scaled score (softcap\\_order = after-bias, "
        f"a spec's order). FlashAttention caps first and adds the bias after, {before} (softcap\\_order = "
        "before-bias), which symattn compare takes on float32 inputs.",
        "zh": f"这里先加 ALiBi 的偏置，再封顶：{after}，$s$ 为缩放后的分数（softcap\\_order = after-bias，spec 的顺序）。"
        f"FlashAttention 先封顶、再加偏置：{before}（softcap\\_order = before-bias），symattn compare 在 float32 "
        "输入上接受这种顺序。",
    }
    assert said[lang] in (tmp_path / "s.md").read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    """A certificate of each order, from specs of the same files (softcap = 2 with four slopes)."""
    made = {}
    for order in ("after-bias", "before-bias"):
        folder = tmp_path_factory.mktemp(order)
        spec = spec_with_cap(folder, f'alibi_slopes = [0.5, 0.25, 4, 0.0625]\nsoftcap_order = "{order}"\n')
        made[order] = folder, certify(spec, "--grad-output", folder / "do.npy", "--digits", "9")
    return made


def torch_certified(folder, order):
    """torch float64 output, LSE, dQ, dK and dV of the certificate spec's files (1, 4, 12, 4), causal."""
    q, k, v, do = (torch.from_numpy(np.load(folder / f"{n}.npy").astype(np.float64)) for n in ("q", "k", "v", "do"))
    for x in (q, k, v):
        x.requires_grad_(True)
    z = q @ k.repeat_interleave(2, 1).transpose(-1, -2) / 2
    bias = (
        torch.tensor([0.5, 0.25, 4, 0.0625], dtype=torch.float64)[:, None, None]
        * (torch.arange(12)[:, None] - torch.arange(12)[None, :]).abs()
    )
    z = CAP * torch.tanh(z / CAP) - bias if order == "before-bias" else CAP * torch.tanh((z - bias) / CAP)
    z = z.masked_fill(torch.ones(12, 12, dtype=torch.bool).triu(1), -torch.inf)
    out = torch.softmax(z, -1) @ v.repeat_interleave(2, 1)
    out.backward(do)
    return {"output": out, "lse": torch.logsumexp(z, -1), "dq": q.grad, "dk": k.grad, "dv": v.grad}


@pytest.mark.parametrize("order", ["after-bias", "before-bias"])
def test_a_certificate_of_each_order_names_it_verifies_and_is_torch_s(certificates, capsys, order):
    from symattn.verifier.__main__ import run

    folder, cert = certificates[order]
    data = json.loads(cert.read_text(encoding="utf-8"))
    assert data["certificate"]["inputs"]["tanh_cap_order"] == order
    agree(data, torch_certified(folder, order))
    with pytest.raises(AssertionError):
        agree(data, torch_certified(folder, "after-bias" if order == "before-bias" else "before-bias"))
    named = (
        f"{cert}: it certifies output, lse, lse2, dq, dk and dv of Q, K, V and dO, with the scale, the mask, the "
        f"slopes and the tanh cap ({order.replace('-', ' the ')})"
    )
    code, out, _ = fast(capsys, cert)
    assert (code, out.splitlines()[-2]) == (0, named)  # as the standalone one names it, the order included
    code, lines = run(cert)
    assert (code, lines[-2]) == (0, named)
    assert lines[-3].endswith(
        f"not read: the scale, the mask, the slopes and the tanh cap ({order.replace('-', ' the ')}) are the "
        "certificate's own)"
    )


@pytest.mark.parametrize("order", ["after-bias", "before-bias"])
def test_a_certificate_made_with_one_order_does_not_verify_for_the_other(certificates, capsys, order):
    from symattn.verifier.__main__ import run

    folder, cert = certificates[order]
    other = "after-bias" if order == "before-bias" else "before-bias"
    forged = forge(cert, lambda d: d["certificate"]["inputs"].__setitem__("tanh_cap_order", other))
    code, lines = run(forged)  # its values are not the other order's
    assert code == 1 and "the exact value does not round to" in lines[0]
    code, out, err = fast(capsys, forged)  # and its spec says the order it was made with
    assert (code, out) == (2, "")
    assert err == (
        f'symattn: {forged}: certificate.inputs.tanh_cap_order: "{other}", but the spec {folder / "s.toml"} gives '
        f'"{order}": the certificate is not of its files\n'
    )


def test_a_certificate_without_the_field_keeps_its_old_meaning(certificates):
    """Certificates made before the field: the cap after the bias, as a spec orders them."""
    from symattn.verifier.__main__ import run

    _, after = certificates["after-bias"]
    old = forge(after, lambda d: d["certificate"]["inputs"].pop("tanh_cap_order"), "old.json")
    assert run(old)[0] == 0
    _, before = certificates["before-bias"]
    old = forge(before, lambda d: d["certificate"]["inputs"].pop("tanh_cap_order"), "old.json")
    assert run(old)[0] == 1


def _without(*names):
    def change(d):
        for name in names:
            d["certificate"]["inputs"].pop(name)

    return change


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda d: d["certificate"]["inputs"].__setitem__("tanh_cap_order", "first"),
            'certificate.inputs.tanh_cap_order: expected "after-bias" or "before-bias", got the text \'first\'',
        ),
        (
            _without("bias_slopes"),
            'certificate.inputs.bias_slopes: absent, but tanh_cap_order "before-bias" orders tanh_cap and bias_slopes',
        ),
        (
            _without("tanh_cap"),
            'certificate.inputs.tanh_cap: absent, but tanh_cap_order "before-bias" orders tanh_cap and bias_slopes',
        ),
        (
            _without("tanh_cap", "bias_slopes"),
            'certificate.inputs.tanh_cap: absent, and bias_slopes too, but tanh_cap_order "before-bias" orders '
            "tanh_cap and bias_slopes",
        ),
    ],
)
def test_a_bad_order_echoes_it_and_an_order_without_its_inputs_names_the_input_missing(
    certificates, capsys, change, problem
):
    """Both verifiers: the value given where it is no order; the input it orders where that is absent."""
    from symattn.verifier.__main__ import run

    _, before = certificates["before-bias"]
    bad = forge(before, change, "bad.json")
    assert run(bad) == (2, [f"{bad}: {problem}"])
    assert fast(capsys, bad) == (2, "", f"symattn: {bad}: {problem}\n")


@pytest.mark.parametrize("order", [None, "before-bias", "after-bias"])
def test_a_sweeps_naive_reference_takes_the_order_compare_takes(inputs, order):
    """The naive reference of FlashAttention's rule in a sweep caps as compare does (it biased first before)."""
    from symattn.sweep.reference import naive

    q, k, v = (t.double() for t in inputs)
    keywords = {"softcap": CAP, "alibi_slopes": torch.tensor(SLOPES)}
    if order is not None:
        keywords["softcap_order"] = order
    out, _ = naive(q, k, v, causal=False, causal_align="top-left", keywords=keywords)
    taken = order or "before-bias"
    assert torch.allclose(out, reference(q, k, v, taken), rtol=1e-13, atol=1e-15)
    assert not torch.allclose(out, reference(q, k, v, "after-bias" if taken == "before-bias" else "before-bias"))


@pytest.mark.parametrize("order", [None, "before-bias", "after-bias", "first"])
def test_a_layout_spec_takes_the_keyword_as_compare_does(tmp_path, capsys, inputs, order):
    """A spec of a layout is compare's arguments: FlashAttention's order unless its key says otherwise."""
    q, k, v = (t[0].transpose(0, 1).contiguous() for t in inputs)  # one varlen sequence: (tokens, heads, d)
    taken = order or "before-bias"
    lines = ['Q = "q.npy"', 'K = "k.npy"', 'V = "v.npy"', 'cu_seqlens_q = "cu.npy"', 'cu_seqlens_k = "cu.npy"']
    lines += ["softcap = 2", "alibi_slopes = [0.5, 0.25]"] + ([] if order is None else [f'softcap_order = "{order}"'])
    out = q if order == "first" else reference(*inputs, taken)[0].transpose(0, 1).float()
    spec = write(tmp_path, lines, q=q, k=k, v=v, cu=np.array([0, 8], np.int32), o=out)
    code, text, err = run_compare(capsys, spec, tmp_path / "o.npy", "--rtol", "1.2e-7", "--atol", "1e-13")
    if order == "first":
        assert (code, text, err) == (2, "", f"symattn: {spec}: {REFUSED}\n")
        return
    assert (code, err) == (0, "")
    assert text.splitlines()[2] == (BEFORE if taken == "before-bias" else AFTER)
    assert json.loads(run_compare(capsys, spec, tmp_path / "o.npy", "--format", "json")[1])["softcap_order"] == taken
