"""A gradebook's notes: what a finding is (a code and its details), and how it is said in a language.

A note about one number names it as the check report names a claim, in the student's tokens: "scaled
S/√d_k (sat, the)", then where the student wrote it: the key of the answers file (``[scaled[3][1]]``,
the line to look for in answers.toml) or the gap of the LMS question (``[part 4]``, as the LMS's own
report numbers the parts of a response).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from symattn.input.records import record


class Place(NamedTuple):
    """An asked number in words: its quantity, its row and column labels (a token, a key or a 1-based
    number, with the axis it is on), and where it was written."""

    quantity: str
    row: str | int | None
    col: str | int | tuple[str, int] | None  # (token, column) in a block's accumulator
    row_axis: str | None
    col_axis: str | None
    key: str = ""  # the answers file's key (scaled[3][1]); "" for an LMS's response
    part: int | None = None  # the gap of an LMS question, 1-based


def place_of(spec, quantity: str, row: int | None, col: int | None, key: str = "", part: int | None = None) -> Place:
    """The place of the entry (row, col), 0-based, of a quantity of ``spec``."""
    from symattn.input.quantities import labels

    return Place(quantity, *labels(spec, quantity, row, col), key=key, part=part)


@record
class Note:
    """A finding about one return, as a code of the language files' ``[grade.note]`` and its details.

    Codes: ``inputs_changed``, ``decimal_comma`` (places: the number, text: as written), ``decimal_commas`` (places:
    the first, text: how many claims), ``duplicate`` (text: how many returns), ``foreign_digits`` (places, text: an
    answer in other digits than 0-9, counted blank), ``not_number`` (places, text: an answer that is not a number,
    counted blank), ``trivial_zeros``, ``trivial_equal``, ``trivial_inputs`` (key: the quantity, token: its row,
    text: how many carried numbers follow from it), ``lms_marks`` (places: the numbers scored otherwise than by the
    LMS, text: the LMS's own total); for returns not graded, ``unreadable`` (text: the reader's message),
    ``no_student``, ``unknown_student`` (text: the id), ``not_checked`` (text: the checker's message),
    ``not_returned`` (no answers file; text: a file with every blank still blank), ``time_limit`` (text: the limit,
    naming the return); for files not read, ``outside`` (text: where the link leads, outside the returns folder),
    ``not_a_file`` (a FIFO, device or socket).
    """

    code: str
    key: str = ""
    text: str = ""
    token: str = ""  # with a quantity as key: the row's token (the note names the quantity in words)
    places: tuple[Place, ...] = ()  # the numbers it is about, named in words


INPUTS_CHANGED = Note("inputs_changed")


def _phrases(lang: str):
    from symattn.rendering.phrases import Phrases, load_language

    return Phrases(load_language(lang), lambda s: s, lang)  # plain text: CSV, JSON and templates escape it


def place_words(p: Place, lang: str, phrases=None) -> str:
    """A place as the check report's place.j2 names a claim, "quantity (row, column)", then where it was
    written: "weight A (sat, the) [weights[3][1]]"."""
    t = phrases or _phrases(lang)

    def label(value: Any, axis: str | None, is_row: bool) -> str:
        if axis == "token_dim":  # (token, column) of a block's accumulator
            return f"{value[0]}, {t('report.axis.dim', n=value[1])}"
        if not isinstance(value, int):
            return str(value)
        return t(f"report.axis.{axis}" + ("_row" if is_row and axis == "dim" else ""), n=value)

    words = t(f"quantity.{p.quantity}")
    if p.row is not None:
        words += f" ({label(p.row, p.row_axis, True)}"
        words += "" if p.col is None else f", {label(p.col, p.col_axis, False)}"
        words += ")"
    at = p.key if p.part is None else t("grade.note.part", n=p.part)
    return t("grade.note.at", place=words, at=at) if at else words


def note_text(lang: str) -> Callable[[Note], str]:
    """A note in words, from the language file (plain text: for CSV, JSON and the templates to escape)."""
    from symattn.input.numeral import in_ascii_digits

    phrases = _phrases(lang)

    def say(n: Note) -> str:
        if n.places:
            where = phrases("list_sep").join(place_words(p, lang, phrases) for p in n.places)
        elif n.token:
            where = phrases("grade.note.place", quantity=phrases(f"quantity.{n.key}"), token=n.token)
        else:
            where = n.key
        if n.code == "foreign_digits":  # what to write instead: ٣.٥ as 3.5
            return phrases("grade.note.foreign_digits", where=where, text=n.text, ascii=in_ascii_digits(n.text))
        if n.code == "not_returned" and n.text:  # a file as ``exercise`` wrote it
            return phrases("grade.note.not_filled", where=where, text=n.text)
        if n.code.startswith("trivial_"):  # "the 1 number carried from it scores", "the 8 numbers … score"
            one_or_more = phrases.raw(f"grade.note.{n.code}")[0 if n.text == "1" else 1]
            return phrases.fill(one_or_more, where=where, text=n.text)
        return phrases(f"grade.note.{n.code}", where=where, text=n.text)

    return say


__all__ = ["INPUTS_CHANGED", "Note", "Place", "note_text", "place_of", "place_words"]
