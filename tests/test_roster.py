"""Rosters and index files (issue 28): ids that differ only in case, and duplicates, named in the roster."""

import pytest

from symattn.classroom import exercises as ex
from symattn.classroom.roster import read_index, read_roster
from symattn.cli.commands import main
from symattn.input.errors import SpecError

from .test_exercise import HOMEWORK


def refused(reader, path):
    with pytest.raises(SpecError) as info:
        reader(path)
    return str(info.value)


CASE = "differ only in case; their folders and files would be one on a disk that ignores case: make them differ"


@pytest.mark.parametrize(
    "reader, text, message",
    [
        (
            read_roster,
            "id,name\nA1,Ann\nb2,Bo\na1,Al\n",
            f"id[4]: student ids 'A1' (line 2) and 'a1' {CASE} in more than case",
        ),
        (
            read_index,
            "id,name,seed\nA1,,1\na1,,2\n",
            f"id[3]: student ids 'A1' (line 2) and 'a1' {CASE} in more than case",
        ),
    ],
)
def test_ids_that_differ_only_in_case_are_refused_naming_both(tmp_path, reader, text, message):
    path = tmp_path / "r.csv"
    path.write_text(text, encoding="utf-8")
    assert refused(reader, path) == f"{path}: {message}"


def test_a_duplicate_id_names_the_roster_not_the_template(tmp_path, capsys):
    roster = tmp_path / "r.csv"
    roster.write_text("id,name\ns1,Ann\ns1,Bo\n", encoding="utf-8")
    args = ["exercise", str(HOMEWORK), "--roster", str(roster), "--seed", "1", "--format", "qti"]
    assert main([*args, "-o", str(tmp_path / "quiz.zip")]) == 2
    assert capsys.readouterr().err == f"symattn: {roster}: id[3]: duplicate student id 's1' (also line 2)\n"
    assert not (tmp_path / "quiz.zip").exists()


def test_ids_given_in_python_that_differ_only_in_case(tmp_path):
    with pytest.raises(SpecError) as info:
        ex.exercise(HOMEWORK, ["A1", "a1"], 1)
    assert str(info.value) == (
        f"{HOMEWORK}: ids[2]: student ids 'A1' (entry 1) and 'a1' differ only in case; their folders and files "
        "would be one on a disk that ignores case: make them differ in more than case"
    )


def test_a_long_id_is_not_echoed_whole(tmp_path):
    roster = tmp_path / "r.csv"
    roster.write_text("id,name\n" + "9" * 5000 + ",Ann\n", encoding="utf-8")
    assert refused(read_roster, roster) == (
        f"{roster}: id[2]: expected an id of at most 64 letters, digits, '.', '_' or '-', starting with a letter "
        f"or digit, got '{'9' * 50}…'"
    )


def test_a_name_given_in_python_is_checked_as_a_rosters_is():
    with pytest.raises(SpecError) as info:
        ex.exercise(HOMEWORK, [("s1", "Ann"), ("s2", "B\x00o")], 1)
    assert str(info.value) == (
        f"{HOMEWORK}: ids[2]: the character '\\x00' (U+0000) is a control character or a line break; labels and "
        "titles are one line of text"
    )
