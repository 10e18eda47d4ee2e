"""Float64 certificates with a soft cap (issue 30): the certificate holds c, both verifiers recompute with
c·tanh(z/c) (the standalone one by its own interval rule, tanh from exp rounded outward, and 1 − tanh² for
the gradients), the values are torch's float64 autograd of FlashAttention's softcap reference, and a
certificate whose cap or values were changed is refused by both."""

from __future__ import annotations

import json

import numpy as np
import pytest

from symattn.verifier.__main__ import run
from tests import test_certificate_variants as variants
from tests.test_certificate_v3 import FAST_CLAIM, STANDALONE_CLAIM, fast, forge
from tests.test_certificate_variants import agree, certify

torch = pytest.importorskip("torch")
CAP = 2.0  # scores of 3·N(0, 1) inputs reach ±20: the cap bends every row


def spec_with_cap(folder, extra: str = ""):
    """(1, 4, 12, 4) queries over (1, 2, 12, 4) keys and values, causal, softcap = 2, and dO."""
    rng = np.random.default_rng(11)
    for name, heads in (("q", 4), ("k", 2), ("v", 2), ("do", 4)):
        np.save(folder / f"{name}.npy", (3 * rng.standard_normal((1, heads, 12, 4))).astype(np.float32))
    text = f'Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\nmask = "causal"\nsoftcap = 2\n{extra}'
    (folder / "s.toml").write_text(text, encoding="utf-8")
    return folder / "s.toml"


def torch_values(folder, slopes=None, cap=CAP):
    """torch's float64 output, LSE, dQ, dK and dV of c·tanh(z/c) (after ALiBi's bias, as a spec orders them)."""
    return variants.torch_values(folder, None, slopes, True, cap)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    folder = tmp_path_factory.mktemp("softcap")
    return folder, certify(spec_with_cap(folder), "--grad-output", folder / "do.npy", "--digits", "9")


def test_a_softcap_certificate_verifies_with_both_and_is_torch_s(made, capsys):
    folder, cert = made
    data = json.loads(cert.read_text(encoding="utf-8"))
    assert data["certificate"]["inputs"]["tanh_cap"] == float(CAP).hex()
    agree(data, torch_values(folder))
    code, out, err = fast(capsys, cert)
    named = f"{cert}: it certifies output, lse, lse2, dq, dk and dv of Q, K, V and dO, with the scale, the mask and the tanh cap"
    assert (code, err, out.splitlines()[-2:]) == (0, "", [named, f"{cert}: 672 values verified: {FAST_CLAIM}"])
    code, lines = run(cert)
    own = "(the spec is hashed, not read: the scale, the mask and the tanh cap are the certificate's own)"
    assert (code, lines[-3].endswith(own), lines[-2:]) == (
        0,
        True,
        [named, f"{cert}: 672 values verified: {STANDALONE_CLAIM}"],
    )


def test_without_the_cap_the_values_are_not_torch_s(made):
    """The cap changes every row: the uncapped scores' values differ (the comparison above can fail)."""
    folder, cert = made
    with pytest.raises(AssertionError):
        agree(json.loads(cert.read_text(encoding="utf-8")), torch_values(folder, cap=None))


def test_a_changed_cap_fails_with_both(made, capsys):
    folder, cert = made
    forged = forge(cert, lambda d: d["certificate"]["inputs"].__setitem__("tanh_cap", "0x1.8000000000000p+1"))
    code, lines = run(forged)  # the values are proved for the cap it holds, 3: they are not
    assert code == 1 and lines[0].startswith(f"{forged}: ") and "the exact value does not round to" in lines[0]
    code, out, err = fast(capsys, forged)  # the spec read back gives another cap
    assert (code, out) == (2, "")
    assert err == (
        f'symattn: {forged}: certificate.inputs.tanh_cap: "0x1.8000000000000p+1", but the spec {folder / "s.toml"} '
        'gives "0x1.0000000000000p+1": the certificate is not of its files\n'
    )


def test_a_changed_value_fails_with_both(made, capsys):
    """A dQ value one digit off (its float and bound kept): neither verifier lets it through."""
    _, cert = made
    data = json.loads(cert.read_text(encoding="utf-8"))
    value = data["dq"]["value"][5][2]
    last = str((int(value[-1]) + 1) % 10)
    forged = forge(cert, lambda d: d["dq"]["value"][5].__setitem__(2, value[:-1] + last))
    code, lines = run(forged)
    assert (code, lines[0]) == (1, f"{forged}: dq[0, 0, 5, 2]: the exact value does not round to {value[:-1] + last}")
    code, out, err = fast(capsys, forged)
    assert (code, err) == (1, "") and f"dq[0, 0, 5, 2]: {value[:-1] + last} is not the rounding of every point" in out


def test_a_cap_is_read_strictly(made):
    _, cert = made
    for raw, problem in (
        ("0x0.0p+0", "0x0.0p+0: above 0 and at most 1000"),
        ("0x1.0000000000000p+10", "0x1.0000000000000p+10: above 0 and at most 1000"),
        ("2", "expected a float64 value as float.hex writes it, got the text '2'"),
    ):
        forged = forge(cert, lambda d, raw=raw: d["certificate"]["inputs"].__setitem__("tanh_cap", raw))
        assert run(forged) == (2, [f"{forged}: certificate.inputs.tanh_cap: {problem}"])


def test_softcap_with_alibi_verifies_with_both_and_is_torch_s(tmp_path, capsys):
    """The spec's order: the bias, then the cap, c·tanh((c_s·S − m·|i − j|)/c)."""
    slopes = [0.5, 0.25, 4, 0.0625]
    spec = spec_with_cap(tmp_path, "alibi_slopes = [0.5, 0.25, 4, 0.0625]\n")
    cert = certify(spec, "--grad-output", tmp_path / "do.npy", "--digits", "9")
    agree(json.loads(cert.read_text(encoding="utf-8")), torch_values(tmp_path, slopes))
    assert fast(capsys, cert)[0] == 0
    assert run(cert)[0] == 0
