"""Certificates that proved the wrong thing (issue 28): each is now one line and exit 2, or a failure (exit 1).

A certificate binds its inputs to its files: the verifier finds them in the certificate's own folder only,
hashes them, reads the spec back and requires its values to be the certificate's inputs. Duplicate keys and
unknown fields are refused, and a version-2 bound may not be wider than its documented factor."""

from __future__ import annotations

import hashlib
import json
import os
from fractions import Fraction

import numpy as np
import pytest

from symattn.cli.commands import main
from symattn.input.errors import SpecError

SPEC = 'Q = "{q}"\nK = "k.npy"\nV = "v.npy"\n'
V1 = ["--no-exact", "--digits", "6"]
V3 = ["--float64"]  # version 2 is what --float64 wrote before (tests/test_certificate_float64.py reads it)
VERSIONS = pytest.mark.parametrize("flags", [V1, V3], ids=["version 1", "version 3"])


@pytest.fixture
def folder(tmp_path):
    """s.toml reads q.npy, s2.toml reads q2.npy (other values); both read the same k.npy and v.npy."""
    rng = np.random.default_rng(5)
    for name in ("q", "k", "v", "q2"):
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((8, 4)).astype(np.float16))
    (tmp_path / "s.toml").write_text(SPEC.format(q="q.npy"), encoding="utf-8")
    (tmp_path / "s2.toml").write_text(SPEC.format(q="q2.npy"), encoding="utf-8")
    return tmp_path


def certify(folder, spec, flags, name="c.json"):
    assert main(["compute", str(folder / spec), "--certify", *flags, "-o", str(folder / name)]) == 0
    return json.loads((folder / name).read_text(encoding="utf-8"))


def verified(capsys, path):
    capsys.readouterr()
    code = main(["verify-certificate", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


def write(path, data):
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def entry(x: float, flags) -> str:
    """An input as the certificate writes it: an exact fraction (version 1) or float.hex (version 3)."""
    return str(Fraction(x)) if flags is V1 else float.hex(x)


@VERSIONS
def test_a_certificate_of_other_inputs_with_the_genuine_files_is_refused(folder, capsys, flags):
    genuine = certify(folder, "s.toml", flags)
    other = certify(folder, "s2.toml", flags, "c2.json")
    other["certificate"]["files"] = genuine["certificate"]["files"]  # every SHA-256 matches
    forged = write(folder / "forged.json", other)
    mine = float(np.load(folder / "q2.npy")[0, 0])
    theirs = float(np.load(folder / "q.npy")[0, 0])
    assert verified(capsys, forged) == (
        2,
        "",
        f"symattn: {forged}: certificate.inputs.Q[1][1]: {entry(mine, flags)}, but the spec {folder / 's.toml'} "
        f"gives {entry(theirs, flags)}: the certificate is not of its files\n",
    )


@VERSIONS
def test_a_spec_that_masks_other_keys_is_not_the_certificates(folder, capsys, flags):
    data = certify(folder, "s.toml", flags)
    masked = folder / "s3.toml"
    masked.write_text(SPEC.format(q="q.npy") + 'mask = "causal"\n', encoding="utf-8")
    data["certificate"]["files"][0] = {
        "name": "spec",
        "path": "s3.toml",
        "sha256": hashlib.sha256(masked.read_bytes()).hexdigest(),
    }
    forged = write(folder / "forged.json", data)
    key, mine, theirs = ("mask", "true", "false") if flags is V1 else ("certificate.inputs.mask", "1", "0")
    assert verified(capsys, forged) == (
        2,
        "",
        f"symattn: {forged}: {key}[1][2]: {mine}, but the spec {masked} gives {theirs}: the certificate is not of "
        "its files\n",
    )


@VERSIONS
def test_a_spec_the_certificate_does_not_cover_is_not_its_spec(folder, capsys, flags):
    data = certify(folder, "s.toml", flags)
    capped = folder / "s4.toml"
    capped.write_text(SPEC.format(q="q.npy") + "softcap = 2\n", encoding="utf-8")
    data["certificate"]["files"][0].update(path="s4.toml", sha256=hashlib.sha256(capped.read_bytes()).hexdigest())
    forged = write(folder / "forged.json", data)
    if flags is V1:
        problem = f"{capped}: softcap: --certify does not cover ALiBi or softcap"
    else:  # float64 certificates cover softcap (tests/test_certificate_softcap.py): this one holds none
        problem = (
            f'{forged}: certificate.inputs.tanh_cap: null, but the spec {capped} gives "0x1.0000000000000p+1": the '
            "certificate is not of its files"
        )
    assert verified(capsys, forged) == (2, "", f"symattn: {problem}\n")


@VERSIONS
def test_the_files_must_be_the_ones_the_spec_reads(folder, capsys, flags):
    data = certify(folder, "s.toml", flags)
    files = data["certificate"]["files"]
    assert [(f["name"], f["path"]) for f in files] == [
        ("spec", "s.toml"),
        ("Q", "q.npy"),
        ("K", "k.npy"),
        ("V", "v.npy"),
    ]
    cases = [
        (
            files[:1] + files[2:],
            f"certificate.files: the spec {folder / 's.toml'} reads Q from q.npy, which the certificate does not "
            "name: it is not of these files",
        ),
        (
            files
            + [{"name": "X", "path": "q2.npy", "sha256": hashlib.sha256((folder / "q2.npy").read_bytes()).hexdigest()}],
            f"certificate.files: names a file for X, which the spec {folder / 's.toml'} does not read: it is not "
            "of these files",
        ),
        (
            files[1:],
            "certificate.files: input files without their spec: a file's values are checked only through the spec "
            "that reads it",
        ),
        (files + files[1:2], "certificate.files.name[5]: 'Q' a second time"),
    ]
    for changed, message in cases:
        data["certificate"]["files"] = changed
        forged = write(folder / "forged.json", data)
        assert verified(capsys, forged) == (2, "", f"symattn: {forged}: {message}\n")


@VERSIONS
def test_without_the_spec_no_files_values_are_claimed(folder, capsys, flags):
    certify(folder, "s.toml", flags)
    (folder / "s.toml").unlink()
    code, out, err = verified(capsys, folder / "c.json")
    assert (code, err) == (0, "")
    cert = folder / "c.json"
    lines = out.splitlines()
    assert " values verified: " in lines[-1]  # the verdict last, after what it certifies (versions 3 and 4)
    assert [line for line in lines[:-1] if ": it certifies " not in line][-5:] == [
        f"{cert}: spec {folder / 's.toml'}: absent, its SHA-256 not checked",
        *(
            f"{cert}: {n} {folder / f'{n.lower()}.npy'}: not checked: its values are read only through the spec, "
            "which is absent"
            for n in "QKV"
        ),
        f"{cert}: its inputs are not checked against its files: not all of them are here",
    ]


PATHS = [
    ("../../secret.txt", "'../../secret.txt': a path may not go up a folder (..)"),
    ("sub/../../secret.txt", "'sub/../../secret.txt': a path may not go up a folder (..)"),
    ("/proc/self/environ", "'/proc/self/environ': a path relative to the certificate's folder is needed"),
    ("/etc/passwd", "'/etc/passwd': a path relative to the certificate's folder is needed"),
    ("C:secret.txt", "'C:secret.txt': a path relative to the certificate's folder is needed"),
    ("link", "'link': leads outside the certificate's folder (through a link)"),
    ("fifo", "'fifo': not a regular file"),
    ("sub", "'sub': not a regular file"),
    ("q\ud800.npy", "'q\\ud800.npy': a control character or a lone surrogate"),
    ("q\udcff.npy", "'q\\udcff.npy': a control character or a lone surrogate"),
    ("q\n.npy", "'q\\n.npy': a control character or a lone surrogate"),
]


@pytest.mark.parametrize("path, problem", PATHS, ids=[p for p, _ in PATHS])
def test_only_regular_files_inside_the_certificates_folder_are_read(tmp_path, capsys, path, problem):
    inside = tmp_path / "certificate"
    (inside / "sub").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("secret", encoding="utf-8")
    os.symlink(tmp_path / "secret.txt", inside / "link")
    os.mkfifo(inside / "fifo")  # opened without waiting for a writer: refused at once, never read
    assert main(["compute", "--example", "causal", "--certify", "--no-exact", "-o", str(inside / "c.json")]) == 0
    data = json.loads((inside / "c.json").read_text(encoding="utf-8"))
    data["certificate"]["files"] = [{"name": "spec", "path": path, "sha256": "0" * 64}]
    forged = write(inside / "forged.json", data)
    assert verified(capsys, forged) == (2, "", f"symattn: {forged}: certificate.files.path[1]: {problem}\n")


def test_the_maker_refuses_a_file_outside_the_certificates_folder(folder, capsys):
    (folder / "out").mkdir()
    target = folder / "out" / "c.json"
    assert main(["compute", str(folder / "s.toml"), "--certify", "--float64", "-o", str(target)]) == 2
    assert capsys.readouterr().err == (
        f"symattn: {folder / 's.toml'}: outside {folder / 'out'}, the folder the certificate is written to: a "
        "certificate names only files in its own folder (write it beside its spec, with -o)\n"
    )
    assert not target.exists()


def test_to_stdout_the_paths_are_relative_to_the_current_folder(folder, capsys, monkeypatch):
    monkeypatch.chdir(folder.parent)
    assert main(["compute", f"{folder.name}/s.toml", "--certify", "--float64"]) == 0
    files = json.loads(capsys.readouterr().out)["certificate"]["files"]
    assert [f["path"] for f in files] == [f"{folder.name}/{n}" for n in ("s.toml", "q.npy", "k.npy", "v.npy")]


@VERSIONS
def test_a_key_given_twice_is_refused_wherever_it_is(folder, capsys, flags):
    certify(folder, "s.toml", flags)
    text = (folder / "c.json").read_text(encoding="utf-8")
    output = json.dumps(json.loads(text)["output"])
    forged = folder / "forged.json"
    # a forged output first, the genuine one second: JSON keeps the last, so only the genuine one was checked
    forged.write_text('{"output": ' + output.replace('"0', '"9') + ",\n" + text[1:], encoding="utf-8")
    assert verified(capsys, forged) == (
        2,
        "",
        f"symattn: {forged}: the key 'output' twice in one object; keep one\n",
    )
    forged.write_text(text.replace('"inputs": {', '"inputs": {"scale": "1", '), encoding="utf-8")
    assert verified(capsys, forged) == (
        2,
        "",
        f"symattn: {forged}: certificate.inputs: the key 'scale' twice in one object; keep one\n",
    )


V1_FIELDS = (
    "tokens, key_tokens, Q, K, V, mask, d_k, sqrt_dk, scale, scores, scaled, exp, exp_sum, weights, output, certificate"
)
UNKNOWN = [
    # a weights table added to a version-2 certificate was ignored in silence
    (
        V3,
        lambda d: d.update(weights={"value": [["1"]]}),
        "weights: an unknown field; this holds output, lse, lse2, certificate",
    ),
    (
        V3,
        lambda d: d["certificate"]["inputs"].update(W_O=[["1"]]),
        "certificate.inputs.W_O: an unknown field; this holds layout, batch, heads, kv_heads, Q, K, V, dO, denominator_logits, bias_slopes, tanh_cap, tanh_cap_order, scale, mask",
    ),
    (
        V3,
        lambda d: d["output"].update(exact=[["1"]]),
        "output.exact: an unknown field; this holds shape, value, path, float, bound",
    ),
    (
        V3,
        lambda d: d["certificate"]["paths"]["output"].update(
            float64=d["certificate"]["paths"]["output"]["float64"] - 1
        ),
        "certificate.paths.output.float64: the number {n}, but output.path has {m}",
    ),
    (
        V3,
        lambda d: d["certificate"].update(path="exact"),
        "certificate.path: expected \"float64\", got the text 'exact'",
    ),
    (V1, lambda d: d.update(window=2), f"window: an unknown field; a version-1 certificate holds {V1_FIELDS}"),
    (
        V1,
        lambda d: d["weights"].update(exact=[["1/2"] * 8] * 8),
        "weights.exact: a closed form, which the verifier cannot check: a certificate holds none",
    ),
    (
        V1,
        lambda d: d["certificate"]["files"][0].update(note="x"),
        "certificate.files.note[1]: an unknown field: a file has name, path and sha256",
    ),
    (
        V1,
        lambda d: d["certificate"]["rational"].update(weightz=None),
        "certificate.rational.weightz: an unknown field; the table of rationals holds sqrt_dk, scale, scores, "
        "scaled, exp, exp_sum, weights, output",
    ),
    (
        V1,
        lambda d: d["certificate"].update(digits=7),
        "sqrt_dk.value: '{shown}' has not the 7 digits of certificate.digits",
    ),
    (
        V1,
        lambda d: d["certificate"].update(precision_bits=d["certificate"]["precision_bits"] + 1),
        "certificate.precision_bits: {bits}, but the finest binary point of the bounds is {real} bits",
    ),
]


@pytest.mark.parametrize("flags, change, message", UNKNOWN, ids=[m.split(":")[0] for _, _, m in UNKNOWN])
def test_every_field_is_known_and_checked(folder, capsys, flags, change, message):
    data = certify(folder, "s.toml", flags)
    genuine = json.loads(json.dumps(data))
    change(data)
    forged = write(folder / "forged.json", data)
    paths = genuine["certificate"].get("paths", {}).get("output", {})
    message = message.format(
        n=paths.get("float64", 0) - 1,
        m=paths.get("float64"),
        shown=genuine.get("sqrt_dk", {}).get("value"),
        bits=genuine["certificate"].get("precision_bits", 0) + 1,
        real=genuine["certificate"].get("precision_bits"),
    )
    assert verified(capsys, forged) == (2, "", f"symattn: {forged}: {message}\n")


def test_bounds_of_2_to_the_1000_do_not_verify_in_version_1(folder, capsys):
    data = certify(folder, "s.toml", V1)
    lo, _ = data["weights"]["bounds"][1][0]
    huge = str(2**1000)
    data["weights"]["bounds"][1][0] = [lo, huge]
    forged = write(folder / "forged.json", data)
    shown = data["weights"]["value"][1][0]
    hashed = (("spec", "s.toml"), ("Q", "q.npy"), ("K", "k.npy"), ("V", "v.npy"))
    assert verified(capsys, forged) == (
        1,
        f"{forged}: weights[2][1]: {shown} is not the rounding of every point of [{lo}, {huge}]\n"
        + "".join(f"{forged}: {name} {folder / file}: SHA-256 matches\n" for name, file in hashed)
        + f"{forged}: its inputs are the values the spec {folder / 's.toml'} gives, read here from its files\n"
        f"{forged}: NOT verified: 1 value does not round to the value shown\n",
        "",
    )


def test_a_key_given_twice_in_any_json_file_is_one_line(tmp_path, capsys):
    spec = tmp_path / "s.json"
    spec.write_text('{"Q": [["1"]], "K": [["1"]], "V": [["1"]], "Q": [["2"]]}', encoding="utf-8")
    assert main(["compute", str(spec)]) == 2
    assert capsys.readouterr().err == f"symattn: {spec}: the key 'Q' twice in one object; keep one\n"
    from symattn.input.files import parse_text

    with pytest.raises(SpecError) as info:  # the first key given twice in the file's order, where it lies
        parse_text('{"a": [1, {"b": {"c": 1, "c": 2}}], "d": {"e": 1, "e": 1}}', "x.json", json_=True)
    assert str(info.value) == "x.json: a[2].b: the key 'c' twice in one object; keep one"


def test_the_standalone_verifier_refuses_a_folder_in_one_line(folder):
    """A helper's attack (session 13): os.fdopen refused a folder with a traceback, before the regular-file test."""
    from symattn.verifier.__main__ import run

    certify(folder, "s.toml", V3)
    (folder / "d.json").mkdir()
    assert run(folder / "d.json") == (2, [f"{folder / 'd.json'}: not a regular file of at most 1073741824 bytes"])
    (folder / "q.npy").unlink()
    (folder / "q.npy").mkdir()  # a file the certificate names
    code, lines = run(folder / "c.json")
    assert (code, lines[-1]) == (2, f"{folder / 'c.json'}: certificate.files.path[2]: 'q.npy': not a regular file")


def test_an_output_whose_exps_fell_below_the_floor_never_has_a_bound_of_0(tmp_path, capsys):
    """A helper's attack (session 14): a query 1000 apart over two keys at scale 1, V's column (0, 2^-149).
    The exact output is e^-1000·2^-149/(1 + e^-1000) ≈ 7.11E-480; the float64 path gave 0 ± 0 (TINY·2^-149
    rounds to 0), so a certificate edited to 0 ± 0 verified, exit 0, where the standalone verifier refused
    it. Now the bound is UNDER (2^-1070) times SAFETY, in the float64 path and in the error-free sums."""
    from symattn.kernel import compensated, float64

    np.save(tmp_path / "q.npy", np.array([[1000.0]], np.float32))
    np.save(tmp_path / "k.npy", np.array([[1.0], [0.0]], np.float32))
    np.save(tmp_path / "v.npy", np.array([[0.0], [2.0**-149]], np.float32))
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\nscale = "1"\n', encoding="utf-8")
    data = certify(tmp_path, "s.toml", V3)
    assert (data["output"]["value"], data["output"]["float"]) == ([["7.112933408E-480"]], [["0x0.0p+0"]])
    data["output"]["bound"][0][0] = "0x0.0p+0"
    code, out, _ = verified(capsys, write(tmp_path / "zero.json", data))
    assert code == 1 and out.splitlines()[0] == (
        f"{tmp_path / 'zero.json'}: output[0, 0]: the certificate's float ± bound, 0x0.0p+0 ± 0x0.0p+0, does not "
        "hold the float64 path's 0x0.0p+0 ± 0x0.0000000000010p-1022"
    )
    head = float64.head(*(np.load(tmp_path / f"{m}.npy").astype(np.float64) for m in "qkv"), Fraction(1), None)
    assert head is not None
    block = next(float64.blocks(head, weights=False, stages=True))
    assert block.stage is not None and (block.output[0, 0], block.output_error[0, 0]) == (0.0, 2.0**-1070 * 1.0001)
    value, error = compensated.stage_outputs(head, block.stage, np.array([0]), np.array([0]))
    assert (value[0], error[0]) == (0.0, 2.0**-1070 * 1.0001)
