"""Hostile text in files and arguments (issue 28): one line, the user's text cut to 50 characters (keys to
100), duplicates refused, never a traceback."""

import pytest

from symattn.cli.commands import main
from symattn.input import builtin

from .test_exercise import HOMEWORK

SEED = builtin.example_text("seed", "en")
A50 = "a" * 50 + "…"


def fails(capsys, *argv):
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["compute", "S", "--digits", "9" * 5000], f"argument --digits: expected a whole number, got '{'9' * 50}…'"),
        (
            ["compute", "S", "--max-seconds", "9" * 5000],
            f"argument --max-seconds: expected seconds above 0 and at most 86400, got '{'9' * 50}…'",
        ),
        (
            ["exercise", str(HOMEWORK), "--count", "9" * 5000, "-o", "x"],
            f"argument --count: expected a whole number, got '{'9' * 50}…'",
        ),
        (["compute", "S", "--subs", "a" * 100_000], f"--subs: expected NAME=VALUE, got '{A50}'"),
        (["example", "--name", "a" * 100_000], f"--name: no built-in example '{A50}'; choose one of "),
    ],
)
def test_arguments_are_echoed_short(tmp_path, capsys, argv, message):
    spec = tmp_path / "s.toml"
    spec.write_text(SEED, encoding="utf-8")
    err = fails(capsys, *[str(spec) if a == "S" else a for a in argv])
    assert err.startswith(f"symattn: {message}")


def test_a_100_kb_key_is_cut_in_the_message(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text("k" * 100_000 + " = 1\n" + SEED, encoding="utf-8")
    assert fails(capsys, "render", spec).startswith(f"symattn: {spec}: {'k' * 100}…: unknown key; expected one of ")


def test_a_json_key_given_twice_is_refused(tmp_path, capsys):
    spec = tmp_path / "s.json"
    spec.write_text('{"tokens": ["a", "b"], "tokens": ["c", "d"], "Q": [[1, 0], [0, 1]]}', encoding="utf-8")
    assert fails(capsys, "render", spec) == f"symattn: {spec}: the key 'tokens' twice in one object; keep one\n"


def test_a_roster_column_given_twice_is_refused(tmp_path, capsys):
    roster = tmp_path / "r.csv"
    roster.write_text("id,name,id\ns1,Ann,s2\n", encoding="utf-8")
    out = tmp_path / "q.zip"
    err = fails(capsys, "exercise", HOMEWORK, "--roster", roster, "--seed", "1", "--format", "qti", "-o", out)
    assert err == f"symattn: {roster}: row 1: columns 1 and 3 are both 'id'; keep one\n"
    assert not out.exists()
