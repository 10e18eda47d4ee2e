"""Version 3 of compute --certify --float64: the output, the LSE in both bases and dQ/dK/dV given dO, of one
head or (batch, head) files with GQA, verified by both verifiers (verify-certificate and the standalone
python -m symattn.verifier), which agree; forged certificates are refused by both, one line each."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from symattn.cli.commands import main
from symattn.verifier.__main__ import run

FAST_CLAIM = (
    "each exact value lies in the certificate's float ± bound and in the interval recomputed here from the inputs "
    "(the float64 engine's float ± its bound, or an exact value, a double-word enclosure or an arb one found here), "
    "and every point of that interval rounds to the value shown"
)
STANDALONE_CLAIM = (
    "each exact value, computed here from the certificate's inputs in exact integers and mpmath's exp and log "
    "rounded outward, lies within the certificate's float ± bound and rounds half-up to the digits shown"
)


def one_head(folder, causal=True):
    """A causal float16 head of 8 × 4 and its dO, as .npy files beside s.toml."""
    rng = np.random.default_rng(7)
    for name in ("q", "k", "v", "do"):
        np.save(folder / f"{name}.npy", rng.standard_normal((8, 4)).astype(np.float16))
    mask = 'mask = "causal"\n' if causal else ""
    (folder / "s.toml").write_text(f'Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n{mask}', encoding="utf-8")
    return folder / "s.toml"


def batched(folder):
    """(2, 4, 16, 8) queries over (2, 2, 16, 8) keys and values: two query heads per key/value head."""
    rng = np.random.default_rng(1)
    for name, heads in (("q", 4), ("k", 2), ("v", 2), ("do", 4)):
        np.save(folder / f"{name}.npy", rng.standard_normal((2, heads, 16, 8)).astype(np.float32))
    (folder / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n', encoding="utf-8")
    return folder / "s.toml"


def certify(spec, *flags, name="c.json"):
    """compute --certify --float64; "--grad-output" names do.npy beside the spec."""
    flags = tuple(str(spec.parent / "do.npy") if f == "do.npy" else f for f in flags)
    cert = spec.parent / name
    assert main(["compute", str(spec), "--certify", "--float64", *flags, "-o", str(cert)]) == 0
    return cert


def fast(capsys, cert):
    """verify-certificate: (exit status, stdout, stderr)."""
    capsys.readouterr()
    code = main(["verify-certificate", str(cert)])
    out, err = capsys.readouterr()
    return code, out, err


def standalone(cert):
    """python -m symattn.verifier: (exit status, its lines)."""
    code, lines = run(cert)
    return code, lines


def forge(cert, change, name="forged.json"):
    data = json.loads(cert.read_text(encoding="utf-8"))
    change(data)
    forged = cert.parent / name
    forged.write_text(json.dumps(data), encoding="utf-8")
    return forged


def test_a_batched_gqa_certificate_with_gradients_verifies_with_both(tmp_path, capsys):
    cert = certify(batched(tmp_path), "--grad-output", "do.npy")
    data = json.loads(cert.read_text(encoding="utf-8"))
    assert data["certificate"]["version"] == 4
    assert {name: data[name]["shape"] for name in ("output", "lse", "lse2", "dq", "dk", "dv")} == {
        "output": [2, 4, 16, 8],
        "lse": [2, 4, 16],
        "lse2": [2, 4, 16],
        "dq": [2, 4, 16, 8],
        "dk": [2, 2, 16, 8],
        "dv": [2, 2, 16, 8],
    }
    assert data["certificate"]["inputs"]["kv_heads"] == 2 and len(data["certificate"]["inputs"]["K"]) == 64
    code, out, err = fast(capsys, cert)
    files = [f"spec {tmp_path / 's.toml'}"] + [f"{n} {tmp_path / f'{f}.npy'}" for n, f in zip(("Q", "K", "V"), "qkv")]
    assert (code, err) == (0, "")
    named = f"{cert}: it certifies output, lse, lse2, dq, dk and dv of Q, K, V and dO, with the scale and the mask"
    assert out.splitlines() == [
        f"{cert}: output: 1024 by the float64 path, 0 by its error-free sums, 0 beyond (exact or arb); lse: 128 "
        "by the float64 path, 0 beyond (exact or arb); lse2: 128 by the float64 path, 0 beyond (exact or arb); dq: "
        "1024 by the float64 path, 0 beyond (exact or arb); dk: 512 by the float64 path, 0 beyond (exact or arb); "
        "dv: 512 by the float64 path, 0 beyond (exact or arb)",
        *(f"{cert}: {f}: SHA-256 matches" for f in files),
        f"{cert}: grad_output {tmp_path / 'do.npy'}: SHA-256 matches",
        f"{cert}: its inputs are the values the spec {tmp_path / 's.toml'} gives, read here from its files",
        f"{cert}: and its dO is the values of its grad_output file, read here",
        named,  # as the standalone verifier names it
        f"{cert}: 3328 values verified: {FAST_CLAIM}",  # the verdict last
    ]
    code, lines = standalone(cert)
    assert (code, lines[-2:]) == (0, [named, f"{cert}: 3328 values verified: {STANDALONE_CLAIM}"])
    assert lines[-3] == (
        f"{cert}: its inputs Q, K, V and dO are the values of the .npy files named, read here (the spec is hashed, "
        "not read: the scale and the mask are the certificate's own)"
    )


def test_the_lse_in_both_bases_agrees_with_torch(tmp_path):
    torch = pytest.importorskip("torch")

    cert = certify(batched(tmp_path), "--digits", "12")
    data = json.loads(cert.read_text(encoding="utf-8"))
    q, k = (torch.from_numpy(np.load(tmp_path / f"{n}.npy").astype(np.float64)) for n in "qk")
    k = k.repeat_interleave(2, dim=1)
    lse = torch.logsumexp(q @ k.transpose(-1, -2) / np.sqrt(8), dim=-1).numpy()
    shown = np.array([[[float(x) for x in row] for row in data["lse"]["value"][b * 4 : b * 4 + 4]] for b in range(2)])
    shown2 = np.array([[[float(x) for x in row] for row in data["lse2"]["value"][b * 4 : b * 4 + 4]] for b in range(2)])
    assert np.abs(shown - lse).max() <= 5e-12 * np.abs(lse).max()
    assert np.abs(shown2 - lse / np.log(2)).max() <= 5e-12 * np.abs(lse / np.log(2)).max()
    assert "dq" not in data and data["certificate"]["inputs"].get("dO") is None


def test_gradients_agree_with_torch(tmp_path):
    torch = pytest.importorskip("torch")

    spec = one_head(tmp_path, causal=False)
    data = json.loads(certify(spec, "--grad-output", "do.npy").read_text(encoding="utf-8"))
    q, k, v, do = (torch.from_numpy(np.load(tmp_path / f"{n}.npy").astype(np.float64)) for n in ("q", "k", "v", "do"))
    for x in (q, k, v):
        x.requires_grad_(True)
    torch.softmax(q @ k.T / 2, dim=-1).matmul(v).backward(do)
    for name, grad in (("dq", q.grad), ("dk", k.grad), ("dv", v.grad)):
        shown = np.array([[float(x) for x in row] for row in data[name]["value"]])
        assert np.abs(shown - grad.numpy()).max() <= 1e-9 * np.abs(grad.numpy()).max(), name


def test_exact_zeros_of_a_causal_head_are_decided_and_verified(tmp_path, capsys):
    # query 0 attends key 0 only: dS of row 0 is 0, so dQ's row 0 is exactly 0 (path "a", shown "0")
    cert = certify(one_head(tmp_path), "--grad-output", "do.npy", "--digits", "6")
    data = json.loads(cert.read_text(encoding="utf-8"))
    assert data["dq"]["value"][0] == ["0", "0", "0", "0"] and data["dq"]["path"][:2] == ["aaaa", "ffff"]
    assert data["certificate"]["paths"]["dq"] == {"float64": 28, "arb": 4}
    assert fast(capsys, cert)[0] == 0
    assert standalone(cert)[0] == 0


def test_a_changed_digit_is_refused_by_both(tmp_path, capsys):
    cert = certify(one_head(tmp_path), "--grad-output", "do.npy", "--digits", "6")
    genuine = json.loads(cert.read_text(encoding="utf-8"))["dk"]["value"][2][1]
    wrong = genuine[:-1] + str((int(genuine[-1]) + 1) % 10)
    forged = forge(cert, lambda d: d["dk"]["value"][2].__setitem__(1, wrong))
    code, out, err = fast(capsys, forged)
    assert (code, err, out.splitlines()[0].split(" is not")[0]) == (1, "", f"{forged}: dk[2, 1]: {wrong}")
    code, lines = standalone(forged)
    assert (code, lines[0]) == (1, f"{forged}: dk[2, 1]: the exact value does not round to {wrong}")
    # and a zero shown where the value is not 0
    forged = forge(cert, lambda d: d["dq"]["value"][3].__setitem__(0, "0"))
    assert fast(capsys, forged)[0] == standalone(forged)[0] == 1


def test_a_swapped_or_changed_file_is_refused_by_both(tmp_path, capsys):
    spec = one_head(tmp_path)
    cert = certify(spec)

    def swap(d):  # Q's entry names k.npy, with k.npy's own SHA-256: every hash matches
        d["certificate"]["files"][1].update(d["certificate"]["files"][2], name="Q")

    forged = forge(cert, swap)
    assert fast(capsys, forged) == (
        2,
        "",
        f"symattn: {forged}: certificate.files: the spec {spec} reads Q from q.npy, which the certificate does not "
        "name: it is not of these files\n",
    )
    q, k = (float(np.load(tmp_path / f"{n}.npy")[0, 0]) for n in "qk")
    assert standalone(forged) == (
        2,
        [
            f"{forged}: certificate.inputs.Q[1][1]: {q.hex()}, but 'k.npy' holds {k.hex()} there: the certificate is "
            "not of its files"
        ],
    )
    np.save(tmp_path / "q.npy", np.load(tmp_path / "k.npy"))  # the file itself changed
    digest = hashlib.sha256((tmp_path / "q.npy").read_bytes()).hexdigest()
    certified = json.loads(cert.read_text(encoding="utf-8"))["certificate"]["files"][1]["sha256"]
    code, out, err = fast(capsys, cert)
    assert (code, err, out.splitlines()) == (
        1,
        "",
        [  # the report on stdout: the file that failed, those that match, what it certifies, the verdict last
            f"{cert}: Q {tmp_path / 'q.npy'}: its SHA-256 is {digest}, the certificate's is {certified}: not the "
            "file certified",
            *(
                f"{cert}: {name} {tmp_path / file}: SHA-256 matches"
                for name, file in (("spec", "s.toml"), ("K", "k.npy"), ("V", "v.npy"))
            ),
            f"{cert}: it certifies output, lse and lse2 of Q, K and V, with the scale and the mask",
            f"{cert}: NOT verified: 1 file is not the file certified",
        ],
    )
    code, lines = standalone(cert)
    assert (code, lines[0]) == (
        1,
        f"{cert}: Q q.npy: its SHA-256 is {digest}, the certificate's is {certified}: not the file certified",
    )


def test_duplicate_keys_are_refused_by_both(tmp_path, capsys):
    cert = certify(one_head(tmp_path))
    text = cert.read_text(encoding="utf-8")
    forged = tmp_path / "forged.json"
    # a forged output first, the genuine one second: a JSON reader keeps the last
    output = json.dumps(json.loads(text)["output"])
    forged.write_text('{"output": ' + output.replace('"0', '"9') + ",\n" + text[1:], encoding="utf-8")
    assert fast(capsys, forged) == (2, "", f"symattn: {forged}: the key 'output' twice in one object; keep one\n")
    assert standalone(forged) == (2, [f"{forged}: the key 'output' twice in one object; keep one"])
    forged.write_text(text.replace('"lse2": {', '"lse2": {"shape": [1], '), encoding="utf-8")
    assert fast(capsys, forged) == (2, "", f"symattn: {forged}: lse2: the key 'shape' twice in one object; keep one\n")
    assert standalone(forged) == (2, [f"{forged}: lse2: the key 'shape' twice in one object; keep one"])


@pytest.mark.parametrize(
    "path, fast_problem, standalone_problem",
    [
        ("../q.npy", "a path may not go up a folder (..)", "goes up a folder (..)"),
        (
            "/etc/passwd",
            "a path relative to the certificate's folder is needed",
            "not a path relative to the certificate's folder",
        ),
        (
            "out.npy",
            "leads outside the certificate's folder (through a link)",
            "leads outside the certificate's folder (through a link)",
        ),
    ],
)
def test_a_path_outside_the_folder_is_refused_by_both(tmp_path, capsys, path, fast_problem, standalone_problem):
    inner = tmp_path / "in"
    inner.mkdir()
    cert = certify(one_head(inner))
    (tmp_path / "secret.npy").write_bytes(b"secret")
    os.symlink(tmp_path / "secret.npy", inner / "out.npy")  # a link that leads out
    forged = forge(cert, lambda d: d["certificate"]["files"][1].update(path=path))
    code, out, err = fast(capsys, forged)
    assert (code, out, err) == (2, "", f"symattn: {forged}: certificate.files.path[2]: {path!r}: {fast_problem}\n")
    assert standalone(forged) == (2, [f"{forged}: certificate.files.path[2]: {path!r}: {standalone_problem}"])


def test_a_version_2_certificate_verifies_with_both(tmp_path, capsys):
    from symattn.certificates.float_maker import compute_float64
    from symattn.input.spec import load_spec

    spec = one_head(tmp_path)
    cert = tmp_path / "c2.json"
    cert.write_text("".join(compute_float64(load_spec(spec), 6, tmp_path)), encoding="utf-8")
    assert json.loads(cert.read_text(encoding="utf-8"))["certificate"]["version"] == 2
    assert fast(capsys, cert)[0] == 0
    code, lines = standalone(cert)
    named = f"{cert}: it certifies output of Q, K and V, with the scale and the mask"
    assert (code, lines[-2:]) == (0, [named, f"{cert}: 32 values verified: {STANDALONE_CLAIM}"])
    assert fast(capsys, cert)[1].splitlines()[-2] == named  # both name it alike
    forged = forge(cert, lambda d: d["output"]["value"][1].__setitem__(0, "0.123456"))
    assert fast(capsys, forged)[0] == 1
    assert standalone(forged) == (
        1,
        [
            f"{forged}: output[1, 0]: the exact value does not round to 0.123456",
            *(line.replace(str(cert), str(forged)) for line in lines[:-3]),  # the files
            named.replace(str(cert), str(forged)),
            f"{forged}: NOT verified: 1 value does not round to the value shown",
        ],
    )


def test_compute_refuses_a_certificate_past_the_verifiers_limit(tmp_path, capsys, monkeypatch):
    from symattn.input import limits

    spec = one_head(tmp_path)
    monkeypatch.setattr(limits, "CERTIFICATE_BYTES", 4000)
    capsys.readouterr()
    assert main(["compute", str(spec), "--certify", "--float64", "-o", str(tmp_path / "c.json")]) == 2
    assert capsys.readouterr().err == (
        f"symattn: {spec}: the certificate passes 4000 bytes, the most verify-certificate reads (CERTIFICATE_BYTES): "
        "certify fewer tokens, columns or heads in one spec\n"
    )
    assert not (tmp_path / "c.json").exists()


def test_a_grad_output_of_another_shape_is_one_line(tmp_path, capsys):
    spec = one_head(tmp_path)
    np.save(tmp_path / "bad.npy", np.zeros((8, 5), np.float32))
    capsys.readouterr()
    assert main(["compute", str(spec), "--certify", "--float64", "--grad-output", str(tmp_path / "bad.npy")]) == 2
    assert (
        capsys.readouterr().err == f"symattn: {tmp_path / 'bad.npy'}: shape: dO is (8, 5); O is (1, 1, 8, 4) (bhnd)\n"
    )
    assert main(["compute", str(spec), "--grad-output", "do.npy"]) == 2
    assert capsys.readouterr().err.endswith(
        "--grad-output: the dO of a --float64 certificate's gradients; give --certify --float64\n"
    )


def test_the_standalone_verifier_runs_as_a_program(tmp_path):
    """python -m symattn.verifier, as a skeptic runs it: only symattn's own (lazy, empty) package and the
    verifier's modules load, no numpy, sympy or flint."""
    cert = certify(one_head(tmp_path))
    said = subprocess.run([sys.executable, "-m", "symattn.verifier", str(cert)], capture_output=True, text=True)
    assert (said.returncode, said.stderr, said.stdout.splitlines()[-1]) == (
        0,
        "",
        f"{cert}: 48 values verified: {STANDALONE_CLAIM}",
    )
    program = (
        "import runpy, sys\n"
        f"sys.argv = ['verifier', {str(cert)!r}]\n"
        "try:\n    runpy.run_module('symattn.verifier', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('symattn', 'numpy', 'sympy', 'flint')))\n"
    )
    said = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert said.stdout.splitlines()[-1] == str(
        ["symattn"]
        + [
            f"symattn.verifier{m}"
            for m in ("", ".arithmetic", ".binding", ".checking", ".npyfile", ".reading", ".values")
        ]
    )


def test_the_standalone_rounding_cell_below_a_power_of_ten_is_ten_times_narrower():
    """0.9999999997 shows as itself at 10 digits, not as 1.000000000: a forged 1.000000000 is refuted, while
    0.99999999995 ≤ x < 1 does round to it (half-up; mirrored below zero)."""
    from decimal import Decimal
    from fractions import Fraction as F

    from symattn.verifier.checking import Value
    from symattn.verifier.reading import Table

    def judged(text, lo, hi):
        table = Table(
            "lse", (2, 3), [["0"] * 3, ["0", text, "0"]], ["aaa"] * 2, [[0.0] * 3] * 2, [[float("inf")] * 3] * 2
        )
        digits = len(Decimal(text).as_tuple().digits)  # the certificate's digits: as many as the text shows
        return Value(table, 1, 1, None, digits).judge(F(lo), F(hi))

    assert (
        judged("1.000000000", "0.9999999997", "0.9999999997")
        == "lse[1, 1]: the exact value does not round to 1.000000000"
    )
    assert judged("1.000000000", "0.99999999995", "0.99999999996") is True
    assert judged("-1.000000000", "-0.99999999996", "-0.99999999995") is True
    assert judged("-1.000000000", "-0.9999999997", "-0.9999999997") == (
        "lse[1, 1]: the exact value does not round to -1.000000000"
    )
    assert judged("2.000000000", "1.99999999995", "1.99999999995") is True
    assert judged("1000", "999.95", "999.96") is True and judged("1000", "999.94", "999.96") is None


def test_a_bnhd_causal_gqa_certificate_agrees_with_torch_sdpa_and_both_verifiers(tmp_path, capsys):
    """(B, N, H, D) files: the tables keep (batch, head, token) order whatever the files' layout."""
    torch = pytest.importorskip("torch")

    rng = np.random.default_rng(3)
    for name, heads in (("q", 4), ("k", 2), ("v", 2), ("do", 4)):
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((2, 12, heads, 8)).astype(np.float16))
    spec = tmp_path / "s.toml"
    spec.write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\nlayout = "bnhd"\nmask = "causal"\n', encoding="utf-8")
    cert = certify(spec, "--grad-output", "do.npy")
    data = json.loads(cert.read_text(encoding="utf-8"))
    q, k, v, do = (
        torch.from_numpy(np.load(tmp_path / f"{n}.npy").astype(np.float64)).transpose(1, 2).requires_grad_(n != "do")
        for n in ("q", "k", "v", "do")
    )
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    out.backward(do)
    for name, tensor in (("output", out), ("dq", q.grad), ("dk", k.grad), ("dv", v.grad)):
        shown = np.array([[float(x) for x in row] for row in data[name]["value"]]).reshape(data[name]["shape"])
        exact = tensor.detach().numpy()
        assert np.abs(shown - exact).max() <= 1e-9 * np.abs(exact).max(), name
    assert fast(capsys, cert)[0] == 0 and standalone(cert)[0] == 0


def test_a_version_3_certificate_of_the_engine_before_issue_30_verifies_on_the_corrected_ones_numbers(
    tmp_path, capsys, monkeypatch
):
    """Version 3 was made by the engine whose split was one bit short (issue 30): both verifiers check its
    claims on their own numbers, the fast one with the corrected engine."""
    from symattn.certificates import tensor_maker
    from symattn.kernel import float64

    spec = batched(tmp_path)
    with monkeypatch.context() as m:  # the engine as it was: s = ⌈(51 + log₂ d)/2⌉, and version 3
        m.setattr(float64, "exact_s", lambda d: -(-(51 + max(1, d - 1).bit_length()) // 2))
        m.setattr(tensor_maker, "VERSION", 3)
        old = certify(spec, "--grad-output", "do.npy", name="old.json")
    new = certify(spec, "--grad-output", "do.npy")
    before, after = (json.loads(c.read_text(encoding="utf-8")) for c in (old, new))
    assert (before["certificate"]["version"], after["certificate"]["version"]) == (3, 4)
    # the same values and floats; every bound moved (the rest's term doubled): hence version 4
    for name in ("output", "lse", "lse2", "dq", "dk", "dv"):
        assert [before[name][k] for k in ("value", "path", "float")] == [
            after[name][k] for k in ("value", "path", "float")
        ]
        moved = [a != b for ra, rb in zip(before[name]["bound"], after[name]["bound"]) for a, b in zip(ra, rb)]
        assert all(moved), name
    code, out, err = fast(capsys, old)
    assert (code, err, out.splitlines()[-1]) == (0, "", f"{old}: 3328 values verified: {FAST_CLAIM}")
    assert standalone(old)[1][-1] == f"{old}: 3328 values verified: {STANDALONE_CLAIM}"


def test_a_version_3_bound_that_does_not_hold_the_corrected_engines_is_refused_in_one_line(tmp_path, capsys):
    cert = certify(one_head(tmp_path, causal=False))

    def shrink(version):  # a bound below the engine's own, a third of the certificate's
        def change(d):
            d["certificate"]["version"] = version
            d["output"]["bound"][2][1] = (float.fromhex(d["output"]["bound"][2][1]) / 4).hex()

        return change

    old, new = forge(cert, shrink(3), "old.json"), forge(cert, shrink(4), "new.json")
    assert fast(capsys, old) == (
        2,
        "",
        f"symattn: {old}: certificate.version: 3: made before symattn corrected its float64 engine (issue 30: the "
        "scores' split was one bit short, so a bound could fail); output[2, 1] does not hold the corrected "
        "engine's float ± bound: make it again\n",
    )
    code, out, err = fast(capsys, new)  # version 4: the engine is the corrected one, the value is wrong
    f, b = (json.loads(new.read_text(encoding="utf-8"))["output"][k][2][1] for k in ("float", "bound"))
    assert (
        code == 1
        and err == ""
        and out.startswith(
            f"{new}: output[2, 1]: the certificate's float ± bound, {f} ± {b}, does not hold the float64 path's "
        )
    )
    assert fast(capsys, forge(cert, lambda d: d["certificate"].update(version=3), "same.json"))[0] == 0


@pytest.mark.parametrize("flags", [(), ("--float64",)], ids=["exact path", "float64 path"])
def test_compute_refuses_to_certify_a_file_whose_name_no_verifier_takes(tmp_path, capsys, flags):
    rng = np.random.default_rng(3)
    for name in ("q\x01", "k", "v"):
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((3, 2)).astype(np.float16))
    spec = tmp_path / "s.toml"
    spec.write_text('Q = "q\\u0001.npy"\nK = "k.npy"\nV = "v.npy"\n', encoding="utf-8")
    capsys.readouterr()
    assert main(["compute", str(spec), "--certify", *flags, "-o", str(tmp_path / "c.json")]) == 2
    assert capsys.readouterr().err == (
        f"symattn: {tmp_path}/q\\x01.npy: a control character or an undecodable byte in its name: rename it to "
        "certify\n"
    )
    assert not (tmp_path / "c.json").exists()


def test_an_edited_kv_heads_is_named_where_the_mask_no_longer_fits(tmp_path, capsys):
    spec = batched(tmp_path)
    spec.write_text(spec.read_text(encoding="utf-8") + 'mask = "causal"\n', encoding="utf-8")
    cert = certify(spec)
    forged = forge(cert, lambda d: d["certificate"]["inputs"].__setitem__("kv_heads", 4))
    line = "certificate.inputs.mask[1]: 16 characters, where K's 64 rows are batch 2 × kv_heads 4 × 8 keys"
    code, out, err = fast(capsys, forged)
    assert (code, out, err) == (2, "", f"symattn: {forged}: {line}\n")
    code, lines = standalone(forged)
    assert (code, lines) == (2, [f"{forged}: {line}"])


def test_big_endian_inputs_compute_certifies_the_standalone_verifier_reads(tmp_path):
    """A helper's attack (session 13): numpy reads '>f2' (and compute --certify certified it), but the standalone
    verifier refused it, so such a certificate could never pass there; its reader takes both byte orders."""
    spec = one_head(tmp_path)
    for name in ("q", "k", "v"):
        np.save(tmp_path / f"{name}.npy", np.load(tmp_path / f"{name}.npy").astype(">f2"))
    code, lines = standalone(certify(spec))
    assert (code, lines[-1].endswith(STANDALONE_CLAIM)) == (0, True)


def test_the_standalone_npy_reader_takes_numpys_header_without_its_spaces():
    from symattn.verifier.npyfile import NpyError, read_npy

    def npy(header: str, body: bytes) -> bytes:
        header += " " * (63 - 10 - len(header)) + "\n"
        return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + body

    body = np.arange(6, dtype=">f4").tobytes()
    assert read_npy(npy("{'descr':'>f4','fortran_order':False,'shape':(2,3)}", body)) == (
        (2, 3),
        [0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
    )
    with pytest.raises(NpyError) as caught:
        read_npy(npy("{'descr':'>i4','fortran_order':False,'shape':(2,3)}", body))
    assert str(caught.value) == (
        "a header this reader does not take (f2, f4, f8 or bf16 only): "
        "\"{'descr':'>i4','fortran_order':False,'shape':(2,3)}  \\n\""
    )
