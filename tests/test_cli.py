import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from symattn.cli.commands import main
from symattn.input import builtin

ROOT = Path(__file__).resolve().parent.parent


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_render_default_is_the_chinese_seed(capsys, golden):
    code, out, err = run(capsys, "render")
    assert (code, err) == (0, "")
    golden("seed.zh.md", out)


def test_render_english_latex_standalone(capsys, golden):
    code, out, _ = run(capsys, "render", "--lang", "en", "--format", "latex", "--standalone")
    assert code == 0
    golden("seed.en.tex", out)


def test_example_prints_the_builtin_spec(capsys):
    assert run(capsys, "example", "--lang", "en") == (0, builtin.example_text("seed", "en"), "")
    assert run(capsys, "example")[1] == builtin.example_text("seed", "zh")


def test_example_roundtrip(tmp_path, capsys):
    code, out, _ = run(capsys, "example", "--lang", "en", "-o", str(tmp_path / "s.toml"))
    assert code == 0 and out == ""
    code, out, _ = run(capsys, "render", str(tmp_path / "s.toml"), "--rounding", "hand", "--focus", "cat")
    assert code == 0
    assert "First the row of “cat” (row 1), by hand:" in out


def test_compute_json(capsys):
    code, out, _ = run(capsys, "compute", "--digits", "6")
    assert code == 0
    data = json.loads(out)
    assert data["tokens"] == ["小猫", "吃", "它"]
    assert data["d_k"] == 2
    assert data["scale"] == {"exact": "sqrt(2)/2", "value": "0.707107"}
    assert data["scores"]["exact"][2] == ["23/25", "19/100", "3/4"]
    assert data["scores"]["value"][2] == ["0.920000", "0.190000", "0.750000"]
    assert data["weights"]["value"][2] == ["0.402653", "0.240300", "0.357047"]
    assert data["output"]["value"][2] == ["4.38358", "2.76005"]
    assert data["exp_sum"]["value"] == ["4.86204", "4.41634", "4.75986"]
    # a weight refers to its row's sum by name; the sum is written once, in exp_sum
    assert data["weights"]["exact"][2][0] == "exp(23*sqrt(2)/50)/s_3"
    assert data["exp_sum"]["name"][2] == "s_3"
    assert data["exp_sum"]["exact"][2] == "exp(19*sqrt(2)/200) + exp(3*sqrt(2)/8) + exp(23*sqrt(2)/50)"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["render", "missing.toml"], "symattn: missing.toml: cannot read file: No such file or directory\n"),
        (
            ["render", "--lang", "fr-CA"],
            "symattn: --lang: the built-in example 'seed' has no language 'fr-CA'; choose one of en, zh\n",
        ),
        (
            ["example", "--lang", "fr"],
            "symattn: --lang: the built-in example 'seed' has no language 'fr'; choose one of en, zh\n",
        ),
        (["render", "--focus", "dog"], "symattn: {seed}: --focus: no token labelled 'dog'; tokens are 小猫, 吃, 它\n"),
        (["render", "--standalone"], "symattn: --standalone needs --format latex\n"),
        (
            ["render", "--format", "docx"],
            "symattn: argument --format: invalid choice: 'docx' (choose from 'markdown', 'latex', 'pdf', 'html', 'beamer', 'beamer-pdf', 'slides')\n",
        ),
        (["render", "--engine", "xelatex"], "symattn: --engine needs --format pdf\n"),
        (["compute", "--digits", "0"], "symattn: --digits: expected an integer from 1 to 1000, got 0\n"),
        (
            ["render", "--example", "nope"],
            "symattn: --example: no built-in example 'nope'; choose one of alibi, backward, backward-mse, causal, cross, decode, flash, gqa, mla, mla-heads, mla-rope, multihead, projection, qk-norm, rope, rope-angles, seed, sinks, softcap, symbolic, window\n",
        ),
    ],
)
def test_errors_are_one_line_exit_2(capsys, argv, message):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("symattn: ")
    if message:
        assert err == message.format(seed=builtin.example_path("seed", "zh"))


def test_bad_spec_file(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('Q = [[1, 0], [0, "1,5"]]\nK = [[1, 0], [0, 1]]\nV = [[1], [2]]\n', encoding="utf-8")
    code, out, err = run(capsys, "render", str(bad))
    assert (code, out, err) == (2, "", f"symattn: {bad}: Q[2][2]: not a number: '1,5' (a decimal comma? write '1.5')\n")


def test_failed_render_leaves_no_file_and_keeps_the_old_one(tmp_path, capsys):
    target = tmp_path / "out.md"
    target.write_text("old", encoding="utf-8")
    bad = tmp_path / "bad.json"
    bad.write_text('{"Q": [[1]], "K": [[1]], "V": [[1]], "lang": "xx"}', encoding="utf-8")
    code, _, err = run(capsys, "render", str(bad), "-o", str(target))
    assert (code, err) == (2, f"symattn: {bad}: lang: expected en or zh, got 'xx'\n")
    assert target.read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json", "out.md"]


def test_output_file_is_written_whole(tmp_path, capsys, golden):
    target = tmp_path / "seed.tex"
    assert run(capsys, "render", "--format", "latex", "--standalone", "-o", str(target))[0] == 0
    golden("seed.zh.tex", target.read_text(encoding="utf-8"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seed.tex"]


def test_python_dash_m_and_traceback_free_errors(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ok = subprocess.run(
        [sys.executable, "-m", "symattn", "render", "--lang", "en"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert ok.returncode == 0 and ok.stdout.startswith("# Transformer attention: Q/K/V by hand\n")
    bad = subprocess.run(
        [sys.executable, "-m", "symattn", "render", "nope.toml"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == "symattn: nope.toml: cannot read file: No such file or directory\n"


def test_compute_without_closed_forms(capsys):
    assert main(["compute", "--no-exact", "--digits", "4"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["weights"] == {
        "value": [["0.4171", "0.2207", "0.3621"], ["0.2608", "0.4592", "0.2799"], ["0.4027", "0.2403", "0.3570"]]
    }
    assert data["scale"] == {"value": "0.7071"}


@pytest.mark.parametrize(
    "argv, name, starts",
    [
        (["render", "--example", "seed", "--lang", "en"], "d.tex", "\\section*{"),  # was Markdown in a .tex
        (["check", "--example", "--lang", "en"], "r.md", "# Checking hand-computed numbers"),
        (["check", "--example", "--lang", "en"], "r.json", "{"),
    ],
)
def test_o_s_name_says_the_format(tmp_path, capsys, argv, name, starts):
    assert main([*argv, "-o", str(tmp_path / name)]) in (0, 1)  # check: the example's slips
    assert (tmp_path / name).read_text(encoding="utf-8").startswith(starts)


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["render", "--example", "seed"],
            "-o .csv: this command writes no csv (markdown, latex, pdf, html); give --format",
        ),
        (
            ["check", "--example"],
            "-o .csv: this command writes no csv (text, json, markdown, latex, pdf, html); give --format",
        ),
    ],
)
def test_o_s_name_of_a_format_the_command_does_not_write_is_refused(tmp_path, capsys, argv, message):
    assert main([*argv, "-o", str(tmp_path / "x.csv")]) == 2
    assert capsys.readouterr().err == f"symattn: {message}\n"
    assert not (tmp_path / "x.csv").exists()


def test_compares_lang_option_names_itself_once(tmp_path, capsys):
    import numpy as np

    for name in "qkvo":
        np.save(tmp_path / f"{name}.npy", np.ones((1, 2, 4, 2), np.float32))
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n', encoding="utf-8")
    code, out, err = run(capsys, "compare", str(tmp_path / "s.toml"), str(tmp_path / "o.npy"), "--lang", "xx")
    assert (code, out, err) == (2, "", "symattn: --lang: expected en or zh, got 'xx'\n")
