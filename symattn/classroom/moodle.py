"""A Moodle XML question bank of a class's variants: one category, one Cloze question per variant.

Each question shows the student's numbers, then one ``{1:NUMERICAL:=value:tolerance#feedback~...}`` gap per
asked number (see :mod:`symattn.classroom.gaps`). After the right answer come the classic slips, each at
0 % with feedback that names it. All variants sit in one category, so that a quiz can draw "1 random
question" from it per student.

Written with :mod:`xml.etree.ElementTree` (stdlib): it escapes every text node once; names are plain text (Moodle
escapes a name where it shows it), the question text is HTML
made by :mod:`symattn.classroom.lmstext`, and the text inside a gap is escaped for Cloze by :func:`cloze`
(Cloze's own characters ``}``, ``#``, ``~``, ``/``, ``"`` and the backslash as character references, since
Moodle's parser undoes a backslash only before ``}`` and ``#``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from symattn.classroom.gaps import Gap, gaps
from symattn.classroom.lmstext import (
    decimals_note,
    intro,
    label_cells,
    math,
    phrases,
    plain_phrases,
    quantity_name,
    text,
    title,
)
from symattn.classroom.variants import Variant
from symattn.input.errors import SpecError

# Moodle splits a gap at an unescaped "~" or "}" (and its answer at "#"), then decodes the feedback's
# character references (html_entity_decode) and undoes only "\}" and "\#". So text in a gap is written
# as references: none of them ends the gap, and the decoded feedback is the HTML of the text (hence
# "&amp;lt;" for "<": decoded once, it is the "&lt;" that shows "<")
_CLOZE = str.maketrans(
    {
        "&": "&amp;amp;",
        "<": "&amp;lt;",
        ">": "&amp;gt;",
        "~": "&#126;",
        "}": "&#125;",
        "{": "&#123;",
        "#": "&#35;",
        "\\": "&amp;#92;",  # decoded, still a reference: a backslash would make Moodle drop it before } and #
        "/": "&#47;",
        '"': "&quot;",
    }
)
PENALTY = "0.3333333"  # Moodle's default penalty per wrong try


def cloze(s: str) -> str:
    """Plain text as it may stand in a Cloze gap's feedback: no character of it ends the gap or its parts,
    and once Moodle has decoded it, it is the text's HTML."""
    return s.translate(_CLOZE)


def feedback(gap: Gap, t) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The right answer's feedback, and (value, feedback) of each slip, as plain text."""

    def said(name: str) -> str:
        if name == "truncated":
            return t.fill(t.raw("lms.truncated"), n=gap.decimals)
        return t.fill(t.raw("lms.slip"), slip=t.raw(f"slip.{name}"))

    return t.raw("lms.right"), tuple((format(s.value, "f"), said(s.name)) for s in gap.slips)


def gap_text(gap: Gap, t) -> str:
    """``{1:NUMERICAL:=0.341:0.0005#Right.~%0%0.330:0.0005#...}``: the right answer first, so that it wins
    where a slip's range touches it."""
    right, slips = feedback(gap, t)
    tol = format(gap.tolerance, "f")
    answers = [f"={format(gap.value, 'f')}:{tol}#{cloze(right)}"]
    answers += [f"%0%{value}:{tol}#{cloze(said)}" for value, said in slips]
    return "{1:NUMERICAL:" + "~".join(answers) + "}"


def question_html(v: Variant, lang: str, the_gaps: Sequence[Gap] | None = None) -> str:
    """The Cloze question text: the student's numbers, how to round, then a table with a gap per asked number."""
    t = phrases(lang)
    the_gaps = gaps(v) if the_gaps is None else the_gaps
    parts = [intro(v, t)]
    shown = []
    for g in the_gaps:
        if g.asked.quantity not in shown and g.rounded:
            shown.append(g.asked.quantity)
    places = {g.asked.quantity: g.decimals for g in the_gaps}
    if shown:
        items = "".join(f"<li>{decimals_note(t, quantity_name(t, q), places[q])}</li>" for q in shown)
        parts.append(f"<p>{t('sheet.rounding')}</p><ul>{items}</ul>")
    head = "".join(f"<th>{text(h)}</th>" for h in t.raw("sheet.header"))
    by_key = {g.asked.key: g for g in the_gaps}
    rows = []
    for k, a in enumerate(v.asked, 1):
        gap = by_key.get(a.key)  # none where a mask makes the entry −∞: shown, not asked
        cells = [str(k), *label_cells(a, v, t), math("-\\infty") if gap is None else gap_text(gap, t)]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    parts.append(f'<table border="1"><tr>{head}</tr>{"".join(rows)}</table>')
    return "".join(parts)


def _category(name: str) -> str:
    # plain text, as Moodle stores a name (it escapes names itself when it shows them); "/" separates a
    # category path, so a slash in a name is written "//"
    return "$course$/top/" + name.replace("/", "//")


def _text_element(parent: ET.Element, tag: str, value: str, fmt: str | None = None) -> None:
    node = ET.SubElement(parent, tag, {"format": fmt} if fmt else {})
    ET.SubElement(node, "text").text = value


def moodle_xml(variants: Sequence[Variant], lang: str | None = None) -> bytes:
    """The question bank as UTF-8 XML bytes, the same bytes for the same variants."""
    if not variants:
        raise SpecError("ids", None, "no students: nothing to put in the quiz")
    lang = lang or variants[0].spec.document.lang
    plain = plain_phrases(lang)  # names are plain text: ElementTree escapes them once, Moodle when it shows them
    quiz = ET.Element("quiz")
    category = ET.SubElement(quiz, "question", {"type": "category"})
    _text_element(category, "category", _category(variants[0].spec.document.title or plain.raw("sheet.untitled")))
    _text_element(category, "info", "", "html")
    for v in variants:
        q = ET.SubElement(quiz, "question", {"type": "cloze"})
        _text_element(q, "name", title(v, plain))
        _text_element(q, "questiontext", question_html(v, lang), "html")
        _text_element(q, "generalfeedback", "", "html")
        ET.SubElement(q, "penalty").text = PENALTY
        ET.SubElement(q, "hidden").text = "0"
        # unique across classes too (Moodle refuses a second question with the same idnumber in a category)
        ET.SubElement(q, "idnumber").text = f"symattn-{v.id}-{v.seed:016x}"
    ET.indent(quiz)
    return (
        b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(quiz, encoding="utf-8", xml_declaration=False) + b"\n"
    )


__all__ = ["cloze", "feedback", "gap_text", "moodle_xml", "question_html"]
