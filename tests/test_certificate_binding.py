"""Certificates bind to their files: the SHA-256 of the spec, checked by verify-certificate, with its own size limit."""

from __future__ import annotations

import hashlib
import json

from symattn.cli.commands import main
from symattn.input import limits
from symattn.input.sources import sha256_file, spec_sources
from symattn.input.spec import load_spec

SPEC = 'Q = [["1", "0"], ["0", "1"]]\nK = [["1", "2"], ["0", "1"]]\nV = [["1", "0.5"], ["2", "-1"]]\n'


def certify(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC, encoding="utf-8")
    cert = tmp_path / "c.json"
    assert main(["compute", str(spec), "--certify", "--no-exact", "--digits", "20", "-o", str(cert)]) == 0
    capsys.readouterr()
    return spec, cert


def test_the_certificate_names_the_spec_files_sha256(tmp_path, capsys):
    spec, cert = certify(tmp_path, capsys)
    files = json.loads(cert.read_text(encoding="utf-8"))["certificate"]["files"]
    # the path relative to the certificate's folder: the only place the verifier looks
    assert files == [{"name": "spec", "path": "s.toml", "sha256": hashlib.sha256(SPEC.encode()).hexdigest()}]
    assert main(["verify-certificate", str(cert)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out == (  # the verdict last
        f"{cert}: spec {spec}: SHA-256 matches\n"
        f"{cert}: its inputs are the values the spec {spec} gives, read here from its files\n"
        f"{cert}: 24 values verified: each exact value lies in its bounds, and every point of the bounds rounds "
        "to the value shown\n"
    )
    assert spec_sources(load_spec({"Q": [["1"]], "K": [["1"]], "V": [["1"]]})) == []  # a spec given as data


def test_a_changed_spec_is_caught_in_one_line(tmp_path, capsys):
    spec, cert = certify(tmp_path, capsys)
    spec.write_text(SPEC.replace('"0.5"', '"0.25"'), encoding="utf-8")
    assert main(["verify-certificate", str(cert)]) == 1
    captured = capsys.readouterr()
    got = hashlib.sha256(spec.read_bytes()).hexdigest()
    want = hashlib.sha256(SPEC.encode()).hexdigest()
    assert captured.out == (  # the report on stdout, its verdict last
        f"{cert}: spec {spec}: its SHA-256 is {got}, the certificate's is {want}: not the file certified\n"
        f"{cert}: NOT verified: 1 file is not the file certified\n"
    )
    assert captured.err == ""
    spec.unlink()  # absent: said, not checked, and the values still verified
    assert main(["verify-certificate", str(cert)]) == 0
    assert capsys.readouterr().out == (
        f"{cert}: spec {spec}: absent, its SHA-256 not checked\n"
        f"{cert}: its inputs are not checked against its files: not all of them are here\n"
        f"{cert}: 24 values verified: each exact value lies in its bounds, and every point of the bounds rounds "
        "to the value shown\n"
    )


def test_a_changed_value_or_bound_is_caught_in_one_line(tmp_path, capsys):
    _, cert = certify(tmp_path, capsys)
    data = json.loads(cert.read_text(encoding="utf-8"))
    value = data["weights"]["value"][0][1]
    lo, hi = data["weights"]["bounds"][0][1]
    changed = json.loads(json.dumps(data))
    changed["weights"]["value"][0][1] = value[:-1] + str((int(value[-1]) + 1) % 10)
    cert.write_text(json.dumps(changed), encoding="utf-8")
    assert main(["verify-certificate", str(cert)]) == 1
    out = capsys.readouterr().out.splitlines()
    spec = tmp_path / "s.toml"
    files = [  # the files' lines, between the values that fail and the verdict
        f"{cert}: spec {spec}: SHA-256 matches",
        f"{cert}: its inputs are the values the spec {spec} gives, read here from its files",
    ]
    assert out == [
        f"{cert}: weights[1][2]: {changed['weights']['value'][0][1]} is not the rounding of every point of [{lo}, {hi}]",
        *files,
        f"{cert}: NOT verified: 1 value does not round to the value shown",
    ]
    changed = json.loads(json.dumps(data))
    changed["weights"]["bounds"][0][1] = [hi, hi]  # a bound moved past the exact value
    cert.write_text(json.dumps(changed), encoding="utf-8")
    assert main(["verify-certificate", str(cert)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{cert}: weights[1][2]: a bound of zero width needs a value known exactly, and this one is not",
        *files,
        f"{cert}: NOT verified: 1 value fails its check",
    ]
    changed["certificate"]["files"][0]["sha256"] = "0" * 63 + "g"
    cert.write_text(json.dumps(changed), encoding="utf-8")
    assert main(["verify-certificate", str(cert)]) == 2
    assert "certificate.files.sha256[1]: expected 64 lowercase hex digits, got '000" in capsys.readouterr().err


def test_the_certificates_own_size_limit(tmp_path, capsys, monkeypatch):
    _, cert = certify(tmp_path, capsys)
    assert cert.stat().st_size > 1000
    monkeypatch.setattr(limits, "FILE_BYTES", 1000)  # a spec's limit no longer applies to a certificate
    assert main(["verify-certificate", str(cert)]) == 0
    capsys.readouterr()
    monkeypatch.setattr(limits, "CERTIFICATE_BYTES", 2**20 // 2)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (2**20))
    assert main(["verify-certificate", str(big)]) == 2
    assert capsys.readouterr().err == f"symattn: {big}: larger than 0 MiB (the limit for a certificate)\n"
    assert limits.CERTIFICATE_BYTES != 4 * 2**20 and sha256_file(big) == hashlib.sha256(b" " * 2**20).hexdigest()


def test_the_certificate_names_the_input_files_too(tmp_path, capsys):
    import numpy as np

    arrays = {"q": [[1, 0.5], [0, 1]], "k": [[1, 2], [0.25, 1]], "v": [[1, 0.5], [2, -1]]}
    for name, rows in arrays.items():
        np.save(tmp_path / f"{name}.npy", np.array(rows, dtype=np.float16))
    spec = tmp_path / "s.toml"
    spec.write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n', encoding="utf-8")
    cert = tmp_path / "c.json"
    assert main(["compute", str(spec), "--certify", "--no-exact", "-o", str(cert)]) == 0
    files = json.loads(cert.read_text(encoding="utf-8"))["certificate"]["files"]
    assert [(f["name"], f["path"]) for f in files] == [("spec", "s.toml")] + [(n.upper(), f"{n}.npy") for n in "qkv"]
    assert all(f["sha256"] == sha256_file(tmp_path / f["path"]) for f in files)
    capsys.readouterr()
    k = np.load(tmp_path / "k.npy")
    k[1, 0] = 0.5  # the kernel's input changed after the certificate was made
    np.save(tmp_path / "k.npy", k)
    assert main(["verify-certificate", str(cert)]) == 1
    out, err = capsys.readouterr()
    assert err == "" and out.startswith(f"{cert}: K {tmp_path / 'k.npy'}: its SHA-256 is ")
    assert out.splitlines()[1:] == [  # after the file that failed: those that match, then the verdict
        f"{cert}: spec {spec}: SHA-256 matches",
        f"{cert}: Q {tmp_path / 'q.npy'}: SHA-256 matches",
        f"{cert}: V {tmp_path / 'v.npy'}: SHA-256 matches",
        f"{cert}: NOT verified: 1 file is not the file certified",
    ]
    assert out.splitlines()[0].endswith(f", the certificate's is {files[2]['sha256']}: not the file certified")
