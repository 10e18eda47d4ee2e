"""LMS export (Moodle XML, QTI 1.2 for Canvas) and LMS results back (grade --lms-csv).

The Moodle XML is read back as Moodle reads it: xml.etree for the file, then a port of Moodle's own Cloze
parser (question/type/multianswer/questiontype.php: its gap and alternative regexes, html_entity_decode,
then "\\}" and "\\#" undone). Every value is recomputed independently (tests/independent.py: Fractions
only, no SymPy) and rounded half-up to the decimals the sheet asks for.
"""

import csv
import html
import io
import math
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from symattn.classroom import exercises as ex
from symattn.classroom.gaps import gaps
from symattn.classroom.lmsgrade import grade_lms, parts
from symattn.classroom.lmstext import IGNORED
from symattn.classroom.moodle import cloze, moodle_xml
from symattn.classroom.qti import qti_files, qti_zip
from symattn.cli.commands import main
from symattn.input.errors import SpecError
from symattn.input.files import read_table

from . import independent as ind
from .test_exercise import HOMEWORK, key_numbers
from .test_grade import outputs_from, without_scaling

ROOT = Path(__file__).resolve().parent.parent
IDS = ["s1", "s2", "s3", "s4", "s5"]
QTI = "{http://www.imsglobal.org/xsd/ims_qtiasiv1p2}"
MANIFEST = "{http://www.imsglobal.org/xsd/imsccv1p1/imscp_v1p1}"

# --- Moodle's Cloze parser, ported (Python's lookbehinds are fixed-width: one per alternative) -----------
_FRACTION = r"=|%(-?[0-9]+(?:[.,][0-9]*)?)%"
_ANSWER = r".+?(?<!\\)(?<!&)(?<!&amp;)(?=[~#}]|$)"
_FEEDBACK = r".*?(?<!\\)(?=[~}]|$)"
_ALTERNATIVE = f"({_FRACTION})?({_ANSWER})(#({_FEEDBACK}))?"
_GAP = re.compile(
    r"\{([0-9]*):(NUMERICAL|NM|MULTICHOICE|MC|SHORTANSWER|SA|MW):(" + _ALTERNATIVE + "(~" + _ALTERNATIVE + r")*)\}",
    re.S,
)
_NUMBER = r"-?(?:[0-9]+[.,]?[0-9]*|[.,][0-9]+)(?:[eE][-+]?[0-9]+)?"


def moodle_gaps(text):
    """(question text with {#n} for each gap, [(type, [(fraction, answer, tolerance, feedback)])])."""
    found = []
    while (m := _GAP.search(text)) is not None:
        alternatives = []
        rest = m.group(3)
        while (a := re.match("~?" + _ALTERNATIVE, rest, re.S)) is not None and a.group(0):
            fraction = "1" if a.group(1) == "=" else (a.group(2) or "0")
            answer, tolerance = re.fullmatch(f"({_NUMBER})(?::({_NUMBER}))?", a.group(3)).groups()
            feedback = html.unescape(a.group(5) or "").replace("\\}", "}").replace("\\#", "#")
            alternatives.append((fraction, answer, tolerance, feedback))
            rest = rest.split(a.group(0), 1)[1]
        found.append((m.group(2), alternatives))
        text = text.replace(m.group(0), f"{{#{len(found)}}}", 1)
    return text, found


# --- the values, independently ----------------------------------------------------------------------------


def expected(v):
    """{claims key: (value, tolerance)} from tests/independent.py, at the decimals the sheet asks for."""
    spec = v.spec
    Q, K, V = ([[x.value for x in row] for row in m] for m in (spec.Q, spec.K, spec.V))
    root = Fraction(math.isqrt(spec.d_k * 10**120), 10**60)  # √d_k within 10^-60
    S, Z, E, sums, A, O = ind.head(Q, K, V, 1 / root)
    d = spec.decimals
    tables = {"scores": (S, None), "scaled": (Z, d.scaled), "weights": (A, d.weights), "output": (O, d.output)}
    out = {}
    for a in v.asked:
        table, places = tables[a.quantity]
        x = table[a.row][a.col]
        if places is None:  # the scores are exact, at the digits of a product of two 1-decimal inputs
            places = 2
        out[a.key] = (ind.text(x, places), format(Decimal(5).scaleb(-places - 1), "f"))
    return out


@pytest.fixture(scope="module")
def variants():
    return ex.exercise(HOMEWORK, IDS, 7)


@pytest.fixture(scope="module")
def bank(variants):
    return moodle_xml(variants)


def test_moodle_xml_has_one_category_and_a_cloze_question_per_variant(bank, variants):
    quiz = ET.fromstring(bank)
    assert quiz.tag == "quiz"
    questions = quiz.findall("question")
    assert [q.get("type") for q in questions] == ["category"] + ["cloze"] * 5
    assert questions[0].findtext("category/text") == "$course$/top/Homework 3: attention by hand"
    assert [q.findtext("name/text") for q in questions[1:]] == [f"Homework 3: attention by hand ({i})" for i in IDS]
    ids = [q.findtext("idnumber") for q in questions[1:]]
    assert len(set(ids)) == 5 and all(i.startswith("symattn-s") for i in ids)
    assert [q.find("questiontext").get("format") for q in questions[1:]] == ["html"] * 5


def test_every_gap_is_the_exact_value_rounded_with_half_a_unit_of_tolerance(bank, variants):
    questions = ET.fromstring(bank).findall("question")[1:]
    for q, v in zip(questions, variants):
        _, found = moodle_gaps(q.findtext("questiontext/text"))
        want = expected(v)
        assert len(found) == len(v.asked) == 11
        for (kind, alternatives), a in zip(found, v.asked):
            assert kind == "NUMERICAL"
            fraction, answer, tolerance, feedback = alternatives[0]
            assert (fraction, (answer, tolerance), feedback) == ("1", want[a.key], "Right.")
            assert all(f == "0" and t == tolerance for f, _, t, _ in alternatives[1:])  # the slips: 0 %, same range


def test_slips_as_feedback_exactly(variants):
    """The first student's gaps with their slips, each slip's value decided exactly (and checked by hand
    where it is easy: no_scaling's scaled is the score itself, truncated cuts off the last digit)."""
    v = ex.exercise(HOMEWORK, ["s01"], 1)[0]
    got = {g.asked.key: [(s.name, str(s.value)) for s in g.slips] for g in gaps(v)}
    assert got == {
        "scores[3][1]": [],
        "scores[3][2]": [],
        "scores[3][3]": [],
        "scaled[3][1]": [("no_scaling", "-0.540"), ("truncated", "-0.381")],
        "scaled[3][2]": [("no_scaling", "0.420"), ("truncated", "0.296")],
        "scaled[3][3]": [("no_scaling", "0.920"), ("truncated", "0.650")],
        "weights[3][1]": [("no_scaling", "0.126"), ("column_softmax", "0.242"), ("no_exp", "-0.675")],
        "weights[3][2]": [("no_scaling", "0.330"), ("column_softmax", "0.397"), ("no_exp", "0.525")],
        "weights[3][3]": [
            ("no_scaling", "0.544"),
            ("column_softmax", "0.491"),
            ("no_exp", "1.150"),
            ("truncated", "0.485"),
        ],
        "output[3][1]": [],
        "output[3][2]": [("no_scaling", "8.4")],
    }
    # truncation, independently: the exact scaled values cut off after 3 decimals
    Q, K, V = ([[x.value for x in row] for row in m] for m in (v.spec.Q, v.spec.K, v.spec.V))
    S, Z, *_ = ind.head(Q, K, V, 1 / Fraction(math.isqrt(2 * 10**120), 10**60))
    assert [ind.text(Fraction(math.trunc(z * 1000), 1000), 3) for z in Z[2]] == ["-0.381", "0.296", "0.650"]
    xml = moodle_xml([v]).decode()
    _, found = moodle_gaps(ET.fromstring(xml).findall("question")[1].findtext("questiontext/text"))
    assert found[3][1] == [
        ("1", "-0.382", "0.0005", "Right."),
        (
            "0",
            "-0.540",
            "0.0005",
            "Not right: this is the value with a classic slip (the scores were not divided by the square root "
            "of the dimension).",
        ),
        ("0", "-0.381", "0.0005", "Not right: this is the value cut off after 3 decimals; round half up instead."),
    ]


def test_chinese_feedback(variants):
    xml = moodle_xml(variants[:1], "zh")
    _, found = moodle_gaps(ET.fromstring(xml).findall("question")[1].findtext("questiontext/text"))
    assert found[0][1][0][3] == "正确。"
    assert any("典型错误（分数没有除以维度的平方根）" in f for _, _, _, f in found[3][1])


def test_moodle_xml_is_the_same_bytes_in_another_process(tmp_path, bank):
    out = tmp_path / "quiz.xml"
    args = ["exercise", str(HOMEWORK), "--seed", "7", "--roster", str(tmp_path / "r.csv"), "--format", "moodle"]
    (tmp_path / "r.csv").write_text("id,name\n" + "".join(f"{i},\n" for i in IDS))
    subprocess.run([sys.executable, "-m", "symattn", *args, "-o", str(out)], check=True, cwd=ROOT)
    assert out.read_bytes() == bank
    assert main([*args, "-o", str(out)]) == 2  # never written over by mistake
    assert main([*args, "-o", str(out), "--force"]) == 0 and out.read_bytes() == bank


def test_hostile_text_stays_text():
    """Tokens and a title that look like Cloze gaps, math, XML or HTML: each shows as its own characters,
    in a span no filter or MathJax reads, and Moodle's parser finds exactly the asked gaps."""
    data = dict(read_table(HOMEWORK))
    tokens = ["{1:NUMERICAL:=1}", "\\(x\\) $$y$$ ~#", '</text>]]>&amp;"/\\']
    data.update(tokens=tokens, focus=3, title='Quiz {2:SA:=a} </text> & \\(x\\) #~/"')
    (v,) = ex.exercise(data, ["s01"], 1)
    quiz = ET.fromstring(moodle_xml([v]))
    category, question = quiz.findall("question")
    # names are plain text after one XML parse (Moodle escapes them where it shows them); "/" doubled in a path
    assert category.findtext("category/text") == '$course$/top/Quiz {2:SA:=a} <//text> & \\(x\\) #~//"'

    text = question.findtext("questiontext/text")
    rest, found = moodle_gaps(text)
    assert len(found) == len(v.asked) and "{#11}" in rest and "{#12}" not in rest
    assert "{" not in re.sub(r"\{#\d+\}|\\sqrt\{d_k\}", "", rest)  # no other brace: no other gap
    spans = re.findall(f'<span class="{IGNORED}">(.*?)</span>', rest)
    assert {html.unescape(s) for s in spans} == set(tokens)
    outside = re.sub(f'<span class="{IGNORED}">.*?</span>', "", rest)
    assert "$" not in outside and outside.count("\\(") == outside.count("\\)")
    maths = re.findall(r"\\\((.*?)\\\)", outside)  # only our own math: numbers, d_k, Q, K, V
    assert len(maths) == 14 and all(re.fullmatch(r"[-0-9.]+,\\ [-0-9.]+|d_k = 2|\\sqrt\{d_k\}|[QKV]", m) for m in maths)
    assert question.findtext("name/text") == 'Quiz {2:SA:=a} </text> & \\(x\\) #~/" (s01)'
    # the QTI package shows the same HTML; its title attribute is plain text
    (name, assessment), *_ = [(n, d) for n, d in qti_files([v]) if n != "imsmanifest.xml"]
    root = ET.fromstring(assessment).find(f"{QTI}assessment")
    assert root.get("title") == 'Quiz {2:SA:=a} </text> & \\(x\\) #~/" (s01)'
    first = root.find(f"{QTI}section/{QTI}item/{QTI}presentation/{QTI}material/{QTI}mattext").text
    spans = re.findall(f'<span class="{IGNORED}">(.*?)</span>', first)
    assert {html.unescape(s) for s in spans} == set(tokens)
    assert "{" not in re.sub(r"\\sqrt\{d_k\}", "", first) and "$" not in first


def test_names_are_the_plain_title_after_one_xml_parse():
    data = dict(read_table(HOMEWORK), title="attention {by} hand & more")
    quiz = ET.fromstring(moodle_xml(ex.exercise(data, ["s01", "s02"], 1)))
    category, *questions = quiz.findall("question")
    assert category.findtext("category/text") == "$course$/top/attention {by} hand & more"
    assert [q.findtext("name/text") for q in questions] == [
        "attention {by} hand & more (s01)",
        "attention {by} hand & more (s02)",
    ]


@pytest.mark.parametrize(
    "plain",
    ["a}b", "a~b", "a#b", "a\\}b", "x\\", 'say "hi" / bye', "<b>&amp;</b>", "{1:NUMERICAL:=1}", "&#125;"],
)
def test_cloze_feedback_escaping_round_trips_through_moodles_parser(plain):
    gap = "{1:NUMERICAL:=1:0.5#" + cloze(plain) + "~%0%2:0.5#" + cloze(plain) + "}"
    rest, found = moodle_gaps("before " + gap + " after")
    assert rest == "before {#1} after"
    shown = html.escape(plain, False).replace("\\", "&#92;")  # the HTML Moodle stores
    assert html.unescape(shown) == plain
    assert found == [("NUMERICAL", [("1", "1", "0.5", shown), ("0", "2", "0.5", shown)])]


# --- QTI ------------------------------------------------------------------------------------------------------


def test_qti_package_structure_and_values(variants):
    data = qti_zip(variants)
    z = zipfile.ZipFile(io.BytesIO(data))
    names = z.namelist()
    assert names == sorted(names) == ["imsmanifest.xml"] + [f"symattn-{i}/symattn-{i}.xml" for i in IDS]
    assert {info.date_time for info in z.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    manifest = ET.fromstring(z.read("imsmanifest.xml"))
    resources = manifest.findall(f"{MANIFEST}resources/{MANIFEST}resource")
    assert [r.get("type") for r in resources] == ["imsqti_xmlv1p2"] * 5
    assert sorted(r.find(f"{MANIFEST}file").get("href") for r in resources) == names[1:]
    idents = [r.get("identifier") for r in resources] + [manifest.get("identifier")]
    for v, name in zip(variants, names[1:]):
        root = ET.fromstring(z.read(name))
        assessment = root.find(f"{QTI}assessment")
        idents.append(assessment.get("ident"))
        items = assessment.findall(f"{QTI}section/{QTI}item")
        idents += [i.get("ident") for i in items]
        kinds = [i.findtext(f"{QTI}itemmetadata/{QTI}qtimetadata/{QTI}qtimetadatafield/{QTI}fieldentry") for i in items]
        assert kinds == ["text_only_question"] + ["numerical_question"] * 11
        assert_items(items[1:], v, expected(v))
    assert len(idents) == len(set(idents))  # every identifier unique
    assert qti_zip(variants) == data  # the same bytes again


def assert_items(items, v, want):
    """Each numerical item names its asked number and accepts its value exactly or within its tolerance."""
    for item, a in zip(items, v.asked, strict=True):
        assert item.get("title") == a.key
        cond = item.find(f"{QTI}resprocessing/{QTI}respcondition/{QTI}conditionvar/{QTI}or")
        value, tolerance = (Decimal(x) for x in want[a.key])
        assert cond.findtext(f"{QTI}varequal") == want[a.key][0]
        assert Decimal(cond.findtext(f"{QTI}and/{QTI}vargte")) == value - tolerance
        assert Decimal(cond.findtext(f"{QTI}and/{QTI}varlte")) == value + tolerance


def test_qti_in_chinese(variants):
    files = dict(qti_files(variants[:1], "zh"))
    root = ET.fromstring(files["symattn-s1/symattn-s1.xml"]).find(f"{QTI}assessment")
    assert root.get("title") == "Homework 3: attention by hand（s1）"
    items = root.findall(f"{QTI}section/{QTI}item")
    assert items[0].get("title") == "你的数字"
    text = items[4].find(f"{QTI}presentation/{QTI}material/{QTI}mattext").text
    assert text.startswith("<p>缩放后 S/√d_k：") and text.endswith("<p>缩放后 S/√d_k 保留 3 位小数</p>")


def test_qti_through_the_cli(tmp_path, variants):
    out = tmp_path / "quiz.zip"
    roster = tmp_path / "r.csv"
    roster.write_text("id,name\n" + "".join(f"{i},\n" for i in IDS))
    assert (
        main(["exercise", str(HOMEWORK), "--seed", "7", "--roster", str(roster), "--format", "qti", "-o", str(out)])
        == 0
    )
    assert out.read_bytes() == qti_zip(variants)
    assert dict(qti_files(variants))["imsmanifest.xml"] == zipfile.ZipFile(out).read("imsmanifest.xml")


# --- results back ------------------------------------------------------------------------------------------------


def summary(values):
    return "; ".join(f"part {k}: {x}" for k, x in enumerate(values, 1))


def responses_csv(rows):
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(
        [
            "Surname",
            "First name",
            "Email address",
            "State",
            "Started on",
            "Completed",
            "Time taken",
            "Grade/11.00",
            "Response 1",
            "Right answer 1",
        ]
    )
    for surname, first, email, answers, right in rows:
        w.writerow([surname, first, email, "Finished", "", "", "", "", answers, right])
    return out.getvalue()


@pytest.fixture(scope="module")
def quiz_class():
    return ex.exercise(HOMEWORK, ["s01", "s02", "s03"], 1)


def test_lms_csv_round_trip_with_a_carried_slip(tmp_path, quiz_class, capsys):
    v1, v2, v3 = quiz_class
    right = {v.id: [format(g.value, "f") for g in gaps(v)] for v in quiz_class}
    keys = [a.key for a in v1.asked]
    slipped = without_scaling(v1, key_numbers(v1))  # scaled = the scores, every later number carried from it
    hand2 = key_numbers(v2)
    half = outputs_from(v2, dict(hand2, **{"weights[3][1]": "0.20"}))  # too coarse; the outputs carried from it
    path = tmp_path / "responses.csv"
    path.write_text(
        responses_csv(
            [
                ("Smith", "=HYPERLINK(1)", "ann@example.org", summary(slipped[k] for k in keys), summary(right["s01"])),
                ("Li", "Bo", "bo@example.org", summary(half[k] for k in keys), summary(right["s02"])),
                ("Wu", "Cy", "cy@example.org", "part 1: 0,71; part 2: ; part 3: abc", summary(right["s03"])),
                ("Overall average", "", "", "-", "-"),
            ]
        ),
        encoding="utf-8",
    )
    args = ["grade", "--lms-csv", str(path), "--template", str(HOMEWORK), "--seed", "1", "--count", "3"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out == (
        "id,name,exact,rounded,carried,input-rounding,too-coarse,last-digit,wrong,blank,score,asked,first_to_fix,notes,error,file\n"
        # the slip: scaled wrong (the LMS agrees), then every later number carried (the LMS: wrong, but
        # output[3][1], where the carried 3.728 lies within 3.7 ± 0.05)
        "ann@example.org,'=HYPERLINK(1) Smith,3,0,5,0,0,0,3,0,8,11,scaled[3][1],\"scored otherwise than by the LMS's own "
        "right/wrong, which gives 4/11: weight A (sat, the) [part 7], weight A (sat, cat) [part 8], "
        'weight A (sat, sat) [part 9], output (sat, column 2) [part 11]",,row 2\n'
        # too coarse: half a mark here, none from the LMS; the outputs carried from it lie within the LMS's range
        "bo@example.org,Bo Li,3,5,2,0,1,0,0,0,10.5,11,weights[3][1],\"scored otherwise than by the LMS's own "
        'right/wrong, which gives 10/11: weight A (sat, the) [part 7]",,row 3\n'
        "cy@example.org,Cy Wu,0,0,0,0,0,0,1,10,0,11,scores[3][1],\"score S (sat, sat) [part 3]: 'abc' is not a number; "
        "counted blank; decimal comma read as a point: score S (sat, the) [part 1] = '0,71'\",,row 4\n"
    )


def test_parts_of_a_cloze_response():
    assert parts("part 1: 0.707; part 2: ; part 3: -1.2", 11) == {1: "0.707", 2: "", 3: "-1.2"}
    assert parts("Teil 1: 0,5; Teil 2: 3", 11) == {1: "0,5", 2: "3"}  # another language's word
    assert parts("part 1: 1; part 3: 2", 11) == {1: "1; part 3: 2"}  # each part found by its own number, in order
    assert parts("part 1: 1; part 2: 2; part 3: 3", 2) == {1: "1", 2: "2; part 3: 3"}
    assert parts("", 11) == {}


@pytest.mark.parametrize(
    "answer, note",
    [
        (
            "1e999999999",
            "score S (sat, the) [part 1]: '1e999999999' is not a number; counted blank",
        ),  # no 10^999999999 is made
        (
            "1" * 65,
            f"score S (sat, the) [part 1]: '{'1' * 50}…' is not a number; counted blank",
        ),  # longer than NUMBER_LENGTH
        ("=1+1", "score S (sat, the) [part 1]: '=1+1' is not a number; counted blank"),
    ],
)
def test_answers_that_are_not_numbers_count_blank(tmp_path, quiz_class, answer, note):
    right = summary(format(g.value, "f") for g in gaps(quiz_class[0]))
    path = tmp_path / "r.csv"
    path.write_text(responses_csv([("A", "B", "a@x", f"part 1: {answer}; part 2: +0.42", right)]))
    (row,) = grade_lms(path, quiz_class).rows
    assert [n.code for n in row.notes] == ["not_number"]  # the LMS marks the same: 1 of 11
    assert (dict(row.counts)["exact"], dict(row.counts)["blank"]) == (1, 10)  # +0.42 is a number
    from symattn.classroom.grading import note_text

    assert note_text("en")(row.notes[0]) == note


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty: expected Moodle's Responses report (Results → Responses → Download)"),
        ("Surname,First name\nA,B\n", "no 'Response 1' column: expected Moodle's Responses report (CSV)"),
        (
            "Surname,Response 1\nA,part 1: 1\n",
            "row 1: no column 'Right answer 1' beside 'Response 1': download the Responses report with "
            "'Right answer' ticked, so that each attempt names its variant",
        ),
        ("Surname,Response 1,Right answer 1\nA,x,y,z\n", "row 2, column 4: a cell beyond the header's columns"),
        (
            "Surname,Response 1,Right answer 1\nA,part 1: 1,part 1: 1\n",
            "no 'Right answer' matches a variant of the template with this --seed and --count (or --roster)",
        ),
        ('Surname,Response 1,Right answer 1\n"A,b\n', "not a CSV file: unexpected end of data (row 2)"),
    ],
)
def test_bad_reports_are_one_line_errors(tmp_path, quiz_class, text, message):
    path = tmp_path / "r.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        grade_lms(path, quiz_class)
    assert str(info.value) == f"{path}: {message}"


def test_a_row_of_another_class_names_its_row_and_column(tmp_path, quiz_class, capsys):
    right = summary(format(g.value, "f") for g in gaps(quiz_class[0]))
    path = tmp_path / "r.csv"
    path.write_text(responses_csv([("A", "B", "a@x", right, right), ("C", "D", "c@x", "part 1: 1", "part 1: 9")]))
    args = ["grade", "--lms-csv", str(path), "--template", str(HOMEWORK), "--seed", "1", "--count", "3"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err == (
        f"symattn: {path}: row 3, column 'Right answer 1': matches no variant of the template with this --seed "
        "and --count (or --roster)\n"
    )


def test_row_limit(tmp_path, quiz_class, monkeypatch):
    from symattn.input import limits

    monkeypatch.setattr(limits, "LMS_ROWS", 2)
    path = tmp_path / "r.csv"
    path.write_text(responses_csv([("A", "B", "a@x", "-", "-")] * 3))
    with pytest.raises(SpecError, match=r"more than 2 rows; grade fewer attempts at a time"):
        grade_lms(path, quiz_class)


@pytest.mark.parametrize(
    "extra, message",
    [
        ([], "symattn: --lms-csv needs --template and --seed (those the quiz was made with)\n"),
        (
            ["--template", str(HOMEWORK), "--seed", "1", "--count", "3", "DIR"],
            "symattn: give a folder of returned answers or --lms-csv, not both\n",
        ),
    ],
)
def test_lms_csv_usage(tmp_path, capsys, extra, message):
    assert main(["grade", "--lms-csv", str(tmp_path / "r.csv"), *extra]) == 2
    assert capsys.readouterr().err == message


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--lms-csv", "r.csv", "--template", str(HOMEWORK), "--seed", "1", "--count", "3", "--index", "i.csv"],
            "symattn: --index goes with a folder of returned answers; --lms-csv takes --seed and --count\n",
        ),
        (
            ["--lms-csv", "r.csv", "--template", str(HOMEWORK), "--seed", "1", "--count", "3", "--feedback", "fb"],
            "symattn: --feedback needs returned answers files; an LMS gives its own feedback\n",
        ),
        (
            ["DIR", "--seed", "1"],
            "symattn: --seed, --count and --roster go with --lms-csv; a class folder has its index.csv\n",
        ),
        ([], "symattn: give a folder of returned answers, or --lms-csv FILE\n"),
    ],
)
def test_grade_usage(capsys, argv, message):
    assert main(["grade", *argv]) == 2
    assert capsys.readouterr().err == message


def test_a_masked_entry_is_shown_not_asked_and_graded_as_given(tmp_path):
    data = dict(read_table(HOMEWORK), mask="causal", focus="cat")
    (v,) = ex.exercise(data, ["s01"], 3)
    assert [a.key for a in v.asked][3:6] == ["scaled[2][1]", "scaled[2][2]", "scaled[2][3]"]
    text = ET.fromstring(moodle_xml([v])).findall("question")[1].findtext("questiontext/text")
    rest, found = moodle_gaps(text)
    assert len(found) == len(v.asked) - 1 == 10  # scaled[2][3] is −∞: the cat may not look at sat
    assert "<td>{#5}</td></tr><tr><td>6</td><td>scaled S/√d_k</td>" in rest
    assert "<td>\\(-\\infty\\)</td>" in rest
    assert [alternatives[0][1] for _, alternatives in found][7] == "0.000"  # its weight is exactly 0
    right = summary(alternatives[0][1] for _, alternatives in found)
    path = tmp_path / "r.csv"
    path.write_text(responses_csv([("A", "B", "a@x", right, right)]))
    (row,) = grade_lms(path, [v]).rows
    assert (dict(row.counts)["wrong"], dict(row.counts)["blank"], row.score, row.asked) == (0, 0, 11, 11)
