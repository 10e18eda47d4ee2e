"""Version-3 certificates of a spec with sinks and ALiBi (issue 30): the certificate holds the sink logits
and the slopes, both verifiers recompute with them (the standalone one by its own rules), the values agree
with torch's float64 autograd of gpt-oss's and ALiBi's references, and a certificate whose sinks or slopes
were changed fails."""

from __future__ import annotations

import json

import numpy as np
import pytest

from symattn.cli.commands import main
from symattn.verifier.__main__ import run
from tests.test_certificate_v3 import FAST_CLAIM, STANDALONE_CLAIM, fast, forge

SINKS = [0.5, 3, -2, 40]  # 40 is above every score (the terms shift by it), −2 below most


SLOPES = [0.5, 0.25, 4, 0.0625]  # 4: the nearest keys win whatever the scores


def spec_with_sinks(folder, sinks=SINKS, extra=""):
    """(1, 4, 12, 4) queries over (1, 2, 12, 4) keys and values, causal, a sink per query head, and dO."""
    rng = np.random.default_rng(11)
    for name, heads in (("q", 4), ("k", 2), ("v", 2), ("do", 4)):
        np.save(folder / f"{name}.npy", rng.standard_normal((1, heads, 12, 4)).astype(np.float32))
    text = f'Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\nmask = "causal"\nsinks = {json.dumps(sinks)}\n{extra}'
    (folder / "s.toml").write_text(text, encoding="utf-8")
    return folder / "s.toml"


def torch_values(folder, sinks=None, slopes=None, causal=True, cap=None):
    """torch's float64 output, LSE, dQ, dK and dV: ALiBi's −m·|i − j|, a soft cap c·tanh(z/c) after it (a spec's
    order), the causal mask, a sink column."""
    torch = pytest.importorskip("torch")
    q, k, v, do = (torch.from_numpy(np.load(folder / f"{n}.npy").astype(np.float64)) for n in ("q", "k", "v", "do"))
    for x in (q, k, v):
        x.requires_grad_(True)
    z = q @ k.repeat_interleave(2, 1).transpose(-1, -2) / 2
    if slopes is not None:
        distance = (torch.arange(12)[:, None] - torch.arange(12)[None, :]).abs()
        z = z - torch.tensor(slopes, dtype=torch.float64)[:, None, None] * distance
    if cap is not None:
        z = cap * torch.tanh(z / cap)
    if causal:
        z = z.masked_fill(torch.ones(12, 12, dtype=torch.bool).triu(1), -torch.inf)
    if sinks is not None:
        z = torch.cat([z, torch.tensor(sinks, dtype=torch.float64)[None, :, None, None].expand(1, 4, 12, 1)], -1)
    out = torch.softmax(z, -1)[..., :12] @ v.repeat_interleave(2, 1)
    lse = torch.logsumexp(z, -1)
    out.backward(do)
    return {"output": out, "lse": lse, "dq": q.grad, "dk": k.grad, "dv": v.grad}


def agree(data, values):
    for name, want in values.items():
        shown = np.array([[float(x) for x in row] for row in data[name]["value"]])
        want = want.detach().numpy().reshape(shown.shape)
        assert np.abs(shown - want).max() <= 1e-8 * np.abs(want).max(), name


def certify(spec, *flags):
    cert = spec.parent / "c.json"
    assert main(["compute", str(spec), "--certify", "--float64", *map(str, flags), "-o", str(cert)]) == 0
    return cert


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sinks")
    spec = spec_with_sinks(folder)
    return folder, certify(spec, "--grad-output", folder / "do.npy", "--digits", "9")


def test_a_certificate_with_sinks_verifies_with_both(made, capsys):
    folder, cert = made
    data = json.loads(cert.read_text(encoding="utf-8"))
    assert data["certificate"]["inputs"]["denominator_logits"] == [float(s).hex() for s in SINKS]
    code, out, err = fast(capsys, cert)
    assert (code, err) == (0, "")
    named = (
        f"{cert}: it certifies output, lse, lse2, dq, dk and dv of Q, K, V and dO, with the scale, the mask and the "
        "denominator logits"
    )
    assert out.splitlines()[-4:] == [
        f"{cert}: its inputs are the values the spec {folder / 's.toml'} gives, read here from its files",
        f"{cert}: and its dO is the values of its grad_output file, read here",
        named,
        f"{cert}: 672 values verified: {FAST_CLAIM}",
    ]
    code, lines = run(cert)
    assert code == 0 and lines[-2:] == [named, f"{cert}: 672 values verified: {STANDALONE_CLAIM}"]
    assert lines[-3] == (
        f"{cert}: its inputs Q, K, V and dO are the values of the .npy files named, read here (the spec is hashed, "
        "not read: the scale, the mask and the denominator logits are the certificate's own)"
    )


def test_the_values_are_torch_s_with_the_sink_column(made):
    folder, cert = made
    agree(json.loads(cert.read_text(encoding="utf-8")), torch_values(folder, SINKS))


def test_changed_sinks_fail_with_both(made, capsys):
    folder, cert = made
    forged = forge(
        cert, lambda d: d["certificate"]["inputs"]["denominator_logits"].__setitem__(0, "0x1.0000000000000p+0")
    )
    code, lines = run(forged)  # the standalone verifier proves the values for the sinks it holds: they are not
    assert code == 1 and lines[0] == f"{forged}: output[0, 0, 0, 0]: the exact value does not round to -0.0672169764"
    code, out, err = fast(capsys, forged)  # the spec read back gives other sinks
    assert (code, out) == (2, "")
    assert err == (
        f'symattn: {forged}: certificate.inputs.denominator_logits: ["0x1.0000000000000p+0", "0x1.8000000000000p+1", '
        '"-0x1.0000000000000p+1", "0x1.4000000000000p+5"], but the spec '
        f'{folder / "s.toml"} gives ["0x1.0000000000000p-1", "0x1.8000000000000p+1", '
        '"-0x1.0000000000000p+1", "0x1.4000000000000p+5"]: the certificate is not of its files\n'
    )


def test_a_certificate_s_sinks_are_read_strictly(made):
    _, cert = made
    forged = forge(cert, lambda d: d["certificate"]["inputs"]["denominator_logits"].pop())
    code, lines = run(forged)
    assert (code, lines) == (
        2,
        [f"{forged}: certificate.inputs.denominator_logits: 3 entries; 4 expected"],
    )


def test_a_logit_past_the_spec_s_limit_is_refused_by_both(made, capsys):
    """e^(2^1000) is past arb's range: a forged logit is one line, never a hang or a traceback."""
    _, cert = made
    forged = forge(
        cert, lambda d: d["certificate"]["inputs"]["denominator_logits"].__setitem__(3, "0x1.0000000000000p+1000")
    )
    problem = "certificate.inputs.denominator_logits[4]: 0x1.0000000000000p+1000: at most 100 in size"
    assert run(forged) == (2, [f"{forged}: {problem}"])
    assert fast(capsys, forged) == (2, "", f"symattn: {forged}: {problem}\n")
    forged = forge(cert, lambda d: d["certificate"]["inputs"]["denominator_logits"].__setitem__(1, "0x1.0p+1"))
    assert run(forged) == (
        2,
        [
            f"{forged}: certificate.inputs.denominator_logits[2]: expected float64 values as float.hex writes it, "
            "got the text '0x1.0p+1'"
        ],
    )


@pytest.mark.parametrize(
    ("extra", "slopes", "causal"),
    [
        ("alibi_slopes = [0.5, 0.25, 4, 0.0625]\n", SLOPES, True),
        ('alibi = true\nmask = "none"\n', [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8], False),  # the paper's, 4 heads
    ],
)
def test_an_alibi_certificate_verifies_with_both_and_is_torch_s(tmp_path, capsys, extra, slopes, causal):
    spec = spec_with_sinks(tmp_path, extra=extra)
    if not causal:
        spec.write_text(spec.read_text(encoding="utf-8").replace('mask = "causal"\n', ""), encoding="utf-8")
    cert = certify(spec, "--grad-output", tmp_path / "do.npy", "--digits", "9")
    data = json.loads(cert.read_text(encoding="utf-8"))
    assert data["certificate"]["inputs"]["bias_slopes"] == [float(m).hex() for m in slopes]
    agree(data, torch_values(tmp_path, SINKS, slopes, causal))
    assert fast(capsys, cert)[0] == 0
    code, lines = run(cert)
    assert code == 0 and lines[-3].endswith(
        "(the spec is hashed, not read: the scale, the mask, the denominator logits and the slopes are the "
        "certificate's own)"
    )
    forged = forge(cert, lambda d: d["certificate"]["inputs"]["bias_slopes"].__setitem__(2, "0x1.0000000000000p+0"))
    code, lines = run(forged)
    i = 1 if causal else 0  # head 2's first query with a key at a distance (the places in numeric order)
    assert (code, lines[0]) == (
        1,
        f"{forged}: output[0, 2, {i}, 0]: the exact value does not round to {data['output']['value'][24 + i][0]}",
    )
    code, out, err = fast(capsys, forged)
    assert (code, out) == (2, "") and err.startswith(f"symattn: {forged}: certificate.inputs.bias_slopes: [")


def test_qk_norm_is_refused_by_certificates(tmp_path, capsys):
    """softcap is certified now (tests/test_certificate_softcap.py); QK-norm is not."""
    spec = spec_with_sinks(tmp_path)
    text = spec.read_text(encoding="utf-8").replace(f"sinks = {json.dumps(SINKS)}\n", "qk_norm = true\n")
    spec.write_text(text, encoding="utf-8")
    assert main(["compute", str(spec), "--certify", "--float64"]) == 2
    assert capsys.readouterr().err == (
        f"symattn: {spec}: --float64 covers Q, K and V of float32 values (float16 and bfloat16 ones are), one head "
        "or (batch, head) files with grouped-query heads, without projections, W_O, RoPE or QK-norm\n"
    )
