"""What the two certificate verifiers print (issue 30, a kernel author's trial): both end with one verdict line,
pass or fail, after one line that names what the certificate certifies in the same words (the cap's order
included where the certificate binds it); a long listing of values is sorted by place, numerically, and cut
at 20; where most values fail, the standalone verifier names the inputs only the certificate gives; a
certificate without tanh_cap_order is said to lack it, not to hold "after-bias"."""

from __future__ import annotations

import json

import pytest

from symattn.verifier.__main__ import run
from symattn.verifier.reading import shortened
from tests.test_certificate_softcap import spec_with_cap
from tests.test_certificate_v3 import FAST_CLAIM, STANDALONE_CLAIM, fast, forge
from tests.test_certificate_variants import certify

ORDER = "before-bias"
CERTIFIES = (
    "it certifies output, lse, lse2, dq, dk and dv of Q, K, V and dO, with the scale, the mask, the slopes and the "
    "tanh cap"
)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A certificate of a cap before the distance bias: (1, 4, 12, 4) causal, softcap 2, four slopes, dO."""
    folder = tmp_path_factory.mktemp("order")
    spec = spec_with_cap(folder, f'alibi_slopes = [0.5, 0.25, 4, 0.0625]\nsoftcap_order = "{ORDER}"\n')
    return folder, certify(spec, "--grad-output", folder / "do.npy", "--digits", "9")


def files(folder, cert) -> list[str]:
    """The fast verifier's lines on the files of ``made``'s certificate (at ``cert``): each hashed, then what they bind."""
    spec = folder / "s.toml"
    hashed = [("spec", "s.toml"), ("Q", "q.npy"), ("K", "k.npy"), ("V", "v.npy"), ("grad_output", "do.npy")]
    return [
        *(f"{cert}: {name} {folder / file}: SHA-256 matches" for name, file in hashed),
        f"{cert}: its inputs are the values the spec {spec} gives, read here from its files",
        f"{cert}: and its dO is the values of its grad_output file, read here",
    ]


def test_both_verifiers_end_with_the_verdict_after_naming_the_order_alike(made, capsys):
    folder, cert = made
    code, out, err = fast(capsys, cert)
    assert (code, err) == (0, "")
    assert out.splitlines()[1:] == [
        f"{cert}: spec {folder / 's.toml'}: SHA-256 matches",
        *(f"{cert}: {name} {folder / f'{f}.npy'}: SHA-256 matches" for name, f in zip("QKV", "qkv")),
        f"{cert}: grad_output {folder / 'do.npy'}: SHA-256 matches",
        f"{cert}: its inputs are the values the spec {folder / 's.toml'} gives, read here from its files",
        f"{cert}: and its dO is the values of its grad_output file, read here",
        f"{cert}: {CERTIFIES} (before the bias)",
        f"{cert}: 672 values verified: {FAST_CLAIM}",
    ]
    code, lines = run(cert)
    assert code == 0
    assert lines == [
        f"{cert}: spec s.toml: SHA-256 matches (its values are not read here)",
        *(
            f"{cert}: {name} {f}.npy: SHA-256 matches, and its values are the certificate's {name}"
            for name, f in zip("QKV", "qkv")
        ),  # fmt: skip
        f"{cert}: grad_output do.npy: SHA-256 matches, and its values are the certificate's dO",
        f"{cert}: its inputs Q, K, V and dO are the values of the .npy files named, read here (the spec is hashed, "
        "not read: the scale, the mask, the slopes and the tanh cap (before the bias) are the certificate's own)",
        f"{cert}: {CERTIFIES} (before the bias)",
        f"{cert}: 672 values verified: {STANDALONE_CLAIM}",
    ]


def test_a_wrong_order_is_named_and_its_listing_cut_in_numeric_order(made):
    """The other order's name on this certificate's values: 632 of 672 fail (query 0 of each head attends key 0
    only, where the bias is 0); the standalone verifier lists 20, names the order the certificate gives."""
    _, cert = made
    forged = forge(cert, lambda d: d["certificate"]["inputs"].__setitem__("tanh_cap_order", "after-bias"))
    code, lines = run(forged)
    values = json.loads(cert.read_text(encoding="utf-8"))["output"]["value"]
    listed = [
        f"{forged}: output[0, 0, {i}, {c}]: the exact value does not round to {values[i][c]}"
        for i in range(1, 6)
        for c in range(4)
    ]
    assert code == 1
    assert lines[:21] == [*listed, f"{forged}: … and 612 more"]
    assert lines[-3:] == [
        f"{forged}: 632 of 672 values fail, as they do where an input the certificate alone gives is not the one "
        "its values were made with (the spec is hashed, not read here): it names bias_slopes, tanh_cap and "
        'tanh_cap_order "after-bias"',
        f"{forged}: {CERTIFIES} (after the bias)",
        f"{forged}: NOT verified: 632 values do not round to the value shown",
    ]


def test_without_the_field_both_say_what_its_absence_means(made, capsys):
    folder, cert = made
    old = forge(cert, lambda d: d["certificate"]["inputs"].pop("tanh_cap_order"), "old.json")
    code, out, err = fast(capsys, old)
    assert (code, out) == (2, "")
    assert err == (
        f"symattn: {old}: certificate.inputs.tanh_cap_order: absent (a certificate without it means "
        f'"after-bias", as those made before the field), but the spec {folder / "s.toml"} gives "before-bias": '
        "the certificate is not of its files\n"
    )
    code, lines = run(old)
    assert code == 1
    assert lines[-3:] == [
        f"{old}: 632 of 672 values fail, as they do where an input the certificate alone gives is not the one its "
        "values were made with (the spec is hashed, not read here): it names bias_slopes, tanh_cap and no "
        'tanh_cap_order (which means "after-bias")',
        f'{old}: {CERTIFIES} (after the bias: a certificate without tanh_cap_order means "after-bias")',
        f"{old}: NOT verified: 632 values do not round to the value shown",
    ]


def test_places_sort_numerically_in_both_verifiers(made, capsys):
    """Twelve LSE values of head 1 one digit off: lse2[0, 1, 2] comes before lse2[0, 1, 10] (as text it would
    not); a few failures name no input."""
    folder, cert = made
    data = json.loads(cert.read_text(encoding="utf-8"))

    def off(text: str) -> str:
        return text[:-1] + str((int(text[-1]) + 1) % 10)

    forged = forge(cert, lambda d: d["lse2"]["value"].__setitem__(1, [off(x) for x in data["lse2"]["value"][1]]))
    code, lines = run(forged)
    assert code == 1
    assert lines[:12] == [
        f"{forged}: lse2[0, 1, {i}]: the exact value does not round to {off(data['lse2']['value'][1][i])}"
        for i in range(12)
    ]
    assert lines[-2:] == [
        f"{forged}: {CERTIFIES} (before the bias)",
        f"{forged}: NOT verified: 12 values do not round to the value shown",
    ]
    code, out, err = fast(capsys, forged)
    said = out.splitlines()
    assert (code, err) == (1, "")
    assert [line.split(": ")[1] for line in said[:12]] == [f"lse2[0, 1, {i}]" for i in range(12)]
    assert said[12:] == [
        *files(folder, forged),
        f"{forged}: {CERTIFIES} (before the bias)",
        f"{forged}: NOT verified: 12 values do not round to the value shown",
    ]


def test_the_fast_verifier_cuts_a_long_listing_too(made, capsys):
    folder, cert = made

    def off(d):
        d["output"]["value"] = [[x[:-1] + str((int(x[-1]) + 1) % 10) for x in row] for row in d["output"]["value"]]

    forged = forge(cert, off)
    code, out, err = fast(capsys, forged)
    said = out.splitlines()
    assert (code, err) == (1, "")
    assert [line.split(": ")[1] for line in said[:20]] == [
        f"output[0, 0, {i}, {c}]" for i in range(5) for c in range(4)
    ]
    assert said[20:] == [
        f"{forged}: … and 172 more",
        *files(folder, forged),
        f"{forged}: {CERTIFIES} (before the bias)",
        f"{forged}: NOT verified: 192 values do not round to the value shown",
    ]


@pytest.mark.parametrize(
    ("count", "want"),
    [(0, []), (20, [f"line {i}" for i in range(20)]), (21, [*(f"line {i}" for i in range(20)), "… and 1 more"])],
)
def test_a_listing_is_cut_after_20_lines(count, want):
    assert shortened([f"line {i}" for i in range(count)]) == want


@pytest.mark.parametrize(
    "value, problem",
    [
        ("abc", 'expected a value such as "0.4171325333" or "2.028E+4", got the text \'abc\''),
        ("NaN", 'expected a value such as "0.4171325333" or "2.028E+4", got the text \'NaN\''),
        ([1], 'expected a value such as "0.4171325333" or "2.028E+4", got a list'),
        (" 0.5", 'expected a value such as "0.4171325333" or "2.028E+4", got the text \' 0.5\''),
        ("0.0918603", "0.0918603 has 6 significant digits, not 9"),
        ("5.00000000E-1", "5.00000000E-1 is not written as Decimal writes its value: 0.500000000"),
    ],
)
def test_a_shown_value_not_as_compute_writes_it_is_refused_by_both_in_one_line(made, capsys, value, problem):
    # the standalone verifier stopped with a traceback on the first three and verified the last three
    folder, cert = made

    def change(data):
        data["output"]["value"][3][2] = value

    forged = forge(cert, change)
    code, out, err = fast(capsys, forged)
    assert (code, out, err) == (2, "", f"symattn: {forged}: output.value[4][3]: {problem}\n")
    assert run(forged) == (2, [f"{forged}: output.value[4][3]: {problem}"])


def test_a_value_written_as_a_json_number_is_refused_by_both_in_one_line(made, capsys):
    """Its digits the right ones, but a number, not the text compute writes (both readers keep a number's
    digits as a str subclass, and both verified it)."""
    folder, cert = made
    shown = json.loads(cert.read_text(encoding="utf-8"))["output"]["value"][3][2]
    assert repr(float(shown)) == shown  # json.dumps writes the float back with the same digits

    def change(data):
        data["output"]["value"][3][2] = float(shown)

    forged = forge(cert, change)
    problem = f'expected a value such as "0.4171325333" or "2.028E+4", got the number {shown}'
    code, out, err = fast(capsys, forged)
    assert (code, out, err) == (2, "", f"symattn: {forged}: output.value[4][3]: {problem}\n")
    assert run(forged) == (2, [f"{forged}: output.value[4][3]: {problem}"])


def test_without_its_files_both_say_the_inputs_are_the_certificates_own(made, capsys):
    # the fast verifier said nothing of files once certificate.files was struck out
    folder, cert = made
    forged = forge(cert, lambda data: data["certificate"].__setitem__("files", []))
    code, out, err = fast(capsys, forged)
    assert (code, err) == (0, "")
    assert f"{forged}: its inputs are the certificate's own: it names no files to check them against" in out
    code, lines = run(forged)
    assert code == 0
    assert f"{forged}: its inputs are not all checked against files: not every one is an .npy file here" in lines


def test_a_byte_order_mark_is_read_by_both(made, capsys):
    # verify-certificate read it, python -m symattn.verifier refused it ("Unexpected UTF-8 BOM")
    folder, cert = made
    marked = folder / "bom.json"
    marked.write_bytes(b"\xef\xbb\xbf" + cert.read_bytes())
    assert fast(capsys, marked)[0] == 0
    assert run(marked)[0] == 0


def test_a_wrong_shape_is_shown_as_written_by_both(made, capsys):
    folder, cert = made
    forged = forge(cert, lambda data: data["output"].__setitem__("shape", [1, 4, 12, 5]))
    problem = "output.shape: expected [1, 4, 12, 4] (from the inputs), got [1, 4, 12, 5]"  # was "got a list"
    assert fast(capsys, forged) == (2, "", f"symattn: {forged}: {problem}\n")
    assert run(forged) == (2, [f"{forged}: {problem}"])
