"""A claim written m·10^k gets its right value written so too: 1.187×10^-3071 for a weight of 1.18650×10^-3071,
not "0.000…" with 3,070 zeros (a claim's exponent may reach limits.CLAIM_EXPONENT, since exact values reach
10^±4343). A claim orders of magnitude off gets the exact value correctly rounded to its own significant digits
(5e-4999 for 1/2: 5×10^-1), and an exact 0 is 0."""

from __future__ import annotations

import json
import re

import pytest

from symattn.cli.commands import main

SPEC = "Q = [[100, 0], [0, 1]]\nK = [[100, 0], [0, 0]]\nV = [[1, 2], [3, 4]]\n"
CLAIMS = """spec = "spec.toml"
[claims]
"weights[1][2]" = "1.000e-3071"
"weights[2][1]" = "5e-4999"
"scores[2][1]" = "1e-60"
"weights[2][2]" = "5.1e-1"
"""


def check(tmp_path, capsys, *options: str) -> str:
    (tmp_path / "spec.toml").write_text(SPEC, encoding="utf-8")
    (tmp_path / "claims.toml").write_text(CLAIMS, encoding="utf-8")
    assert main(["check", str(tmp_path / "claims.toml"), *options]) == 1
    out, err = capsys.readouterr()
    assert err == ""
    return out


def test_the_right_values_are_written_as_the_claims_are(tmp_path, capsys):
    out = check(tmp_path, capsys)
    assert len(out) < 2000
    lines = [line.strip() for line in out.splitlines()]
    assert lines[4:8] == [
        "1   score S (t2, t1)            1e-60       wrong         0 = 0",
        "2   weight A (t1, t2)           1.000e-3071 wrong         1.18650×10^-3071 = 1/(1 + exp(5000*sqrt(2)))",
        "3   weight A (t2, t1)           5e-4999     wrong         0.5 = 1/2",
        "4   weight A (t2, t2)           5.1e-1      last-digit    0.5 = 1/2",
    ]
    assert [line for line in lines if "correctly rounded" in line] == [
        "0×100 + 1×0 = 0; correctly rounded: 0",
        "1 / 8.42814×10^3070 ≈ 1.18650×10^-3071; correctly rounded: 1.187×10^-3071",
        "1 / 2 = 0.5; correctly rounded: 5×10^-1",
        "1 / 2 = 0.5; correctly rounded: 5.0×10^-1",
    ]
    assert lines[-1] == (
        "Fix first: score S (t2, t1) is given as 1e-60 but should be 0 (later mistakes may follow from it)."
    )


def test_json_gives_them_as_decimals_with_an_exponent(tmp_path, capsys):
    data = json.loads(check(tmp_path, capsys, "--format", "json"))
    got = {c["claimed"]: (c["verdict"], c["expected"]) for c in data["claims"]}
    assert got == {
        "1.000e-3071": ("wrong", "1.187E-3071"),
        "5e-4999": ("wrong", "0.5"),
        "1e-60": ("wrong", "0"),
        "5.1e-1": ("last-digit", "0.50"),
    }


@pytest.mark.client
def test_the_latex_report_sets_them_on_the_page(tmp_path, capsys, latex):
    tex = check(tmp_path, capsys, "--format", "latex", "--standalone")
    assert "1.187\\times 10^{-3071}" in tex
    assert "0.0000000000" not in tex
    latex(tex, "pdflatex", tmp_path)


LARGE_SPEC = 'tokens = ["a", "b", "c"]\nQ = [[1, 2], [0.5, -1], [3, 0]]\nK = [[0.2, 1], [-1, 0.5], [2, 2]]\nV = [[1, 0], [0, 1], [3, -2]]\n'
LARGE = """spec = "spec.toml"
[claims]
"scores[1][3]" = "6e3"
"scores[2][3]" = "6.00e3"
"exp_sum[1]" = "7.5e3"
"weights[1][3]" = "9e2"
"""


def test_a_claim_too_large_gets_the_value_at_its_own_digits_not_0(tmp_path, capsys):
    """Rounded to 6e3's place (thousands), 6 is 0 and 75.3 is 1×10^2: each is the value at the claim's own
    significant digits instead, and a value carried from the claims stays at the claim's place."""
    (tmp_path / "spec.toml").write_text(LARGE_SPEC, encoding="utf-8")
    (tmp_path / "claims.toml").write_text(LARGE, encoding="utf-8")
    assert main(["check", str(tmp_path / "claims.toml")]) == 1
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    assert [line.split("; from your own")[0] for line in lines if "correctly rounded" in line] == [
        "1×2 + 2×2 = 6; correctly rounded: 6×10^0",
        "0.5×2 + (-1)×2 = -1; correctly rounded: -1.00×10^0",
        "4.73809 + 1 + 69.5914 ≈ 75.3295; correctly rounded: 7.5×10^1",
        "69.5914 / 75.3295 ≈ 0.923827; correctly rounded: 9×10^-1",
    ]
    # from the claimed score 6e3: e^(6000/√2) at the claim's place (hundreds), two digits shown
    assert "from your own earlier numbers: 3.6×10^1842" in lines[lines.index("sum of e^z (a): 7.5e3 — wrong") + 1]


@pytest.mark.client
def test_the_markdown_report_sets_them_as_math_that_katex_parses(tmp_path, capsys, katex):
    md = check(tmp_path, capsys, "--format", "markdown")
    assert "| 1.000e-3071 | $1.18650\\times 10^{-3071}$ |" in md
    assert "correctly rounded: $1.187\\times 10^{-3071}$" in md
    prose = [line for line in md.splitlines() if line.startswith(("correctly rounded", "Fix first"))]
    assert len(prose) == 5 and not any("\\" in re.sub(r"\$[^$]*\$", "", line) for line in prose)
    assert katex(md) == []


@pytest.mark.parametrize(
    "spec, message",
    [
        ("nothere.toml", "spec: cannot read 'nothere.toml': no such file"),
        ("folder", "spec: cannot read 'folder': a folder"),
        ("claims.toml", "spec: 'claims.toml' is this claims file itself; name the spec's own file"),
    ],
)
def test_a_spec_the_claims_file_names_but_cannot_be_read_names_the_claims_file(tmp_path, capsys, spec, message):
    (tmp_path / "folder").mkdir()
    claims = tmp_path / "claims.toml"
    claims.write_text(f'spec = "{spec}"\n[claims]\nscores = [[1]]\n', encoding="utf-8")
    assert main(["check", str(claims)]) == 2
    assert capsys.readouterr() == ("", f"symattn: {claims}: {message}\n")


@pytest.mark.parametrize(
    "spec, message",
    [
        ("/etc/hostname", "spec: '/etc/hostname': a file name relative to the claims file's folder is needed"),
        ("../outside.toml", "spec: '../outside.toml': a file name may not go up a folder (..)"),
        ("link.toml", "spec: 'link.toml': leads outside the claims file's folder (through a link)"),
    ],
)
def test_the_spec_a_claims_file_names_is_read_beside_it_only(tmp_path, capsys, spec, message):
    (tmp_path / "outside.toml").write_text('Q = [[1]]\nK = [[1]]\nV = [["1"]]\n', encoding="utf-8")
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "link.toml").symlink_to(tmp_path / "outside.toml")
    claims = folder / "claims.toml"
    claims.write_text(f'spec = "{spec}"\n[claims]\nscores = [[1]]\n', encoding="utf-8")
    assert main(["check", str(claims)]) == 2
    assert capsys.readouterr() == ("", f"symattn: {claims}: {message}\n")
