"""Which characters a label or title may hold, and the ``$…$`` math of titles.

Checked when input is read, so that no client (pdflatex, xelatex, KaTeX, a
browser) ever gets text it cannot show; which script each character is in, and
which font sets it, is :mod:`symattn.input.scripts`; title math is parsed by
:mod:`symattn.input.titlemath`.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

from symattn.input import scripts
from symattn.input.messages import said

# --- what a label or title may hold ------------------------------------------
# A whitelist by Unicode properties: letters, marks, digits, punctuation, symbols
# and the plain space, in a script that a PDF font of ours sets (input.scripts).
# Refused, with the reason: controls and line breaks, bidirectional controls,
# invisible characters that would make two labels look alike, unassigned and
# private-use code points, lone surrogates, and what no font of ours has (emoji).
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt): invisible wherever they stand
_IGNORABLE = (
    (0xAD, 0xAD),
    (0x34F, 0x34F),
    (0x61C, 0x61C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)

# Text from outside that no check refused (a name in an LMS's CSV, a path) may still hold controls: a NUL stops
# TeX, an ESC drives a terminal, a right-to-left override reorders a gradebook line. Every output shows each as
# its escape (\x1b, \u202e); tab and line breaks are left to the format they are in.
CONTROL_ESCAPES = {
    chr(c): repr(chr(c))[2:-1]  # "x1b", "u202e": what follows the backslash
    for c in (*range(0x20), *range(0x7F, 0xA0), *map(ord, sorted(_BIDI)))
    if c not in (0x09, 0x0A, 0x0D)
}
_SHOW_CONTROLS = str.maketrans({ch: "\\" + escape for ch, escape in CONTROL_ESCAPES.items()})


def show_controls(text: str) -> str:
    """Text with each of its controls (``CONTROL_ESCAPES``) written as its escape."""
    return text.translate(_SHOW_CONTROLS)


NORMAL_FORM: Literal["NFC"] = "NFC"  # labels are compared as read in this form: a decomposed "người" is the same label


def normalize(text: str) -> str:
    """Text as symattn keeps it: Unicode NFC, so that two spellings of one label are one label."""
    return unicodedata.normalize(NORMAL_FORM, text)


def unsupported_character(text: str) -> str | None:
    """Why ``text`` (in NFC) cannot be a label or title: its first character that no output shows; or None."""
    base: scripts.Script | None = None  # the script of the last letter, for the marks after it
    for i, ch in enumerate(text):
        category = unicodedata.category(ch)
        why = _refusal(text, i, category, base)
        if why is not None:
            name = unicodedata.name(ch, "")
            what = f"U+{ord(ch):04X}" + (f" {name}" if name else "")
            shown = ch if ch.isprintable() and category[0] not in "MZ" else ascii(ch)[1:-1]
            return said("character", shown=shown, what=what, why=why)
        if category[0] != "M" and not scripts.is_joiner(ch):
            base = scripts.script_of(ch)
    return None


def _refusal(text: str, i: int, category: str, base: scripts.Script | None) -> str | None:
    ch = text[i]
    if category == "Cs":
        return said("char_surrogate")
    if category in ("Cc", "Zl", "Zp"):
        return said("char_control")
    if ch in _BIDI:
        return said("char_bidi")
    if scripts.is_joiner(ch):
        if _joins(text, i):
            return None
        return said("char_joiner")
    if category == "Cf" or any(lo <= ord(ch) <= hi for lo, hi in _IGNORABLE):
        return said("char_invisible")
    if category == "Cn":
        return said("char_unassigned")
    if category == "Co":
        return said("char_private")
    if category == "Zs" and ch != " ":
        return said("char_space")
    if category[0] == "M" and (i == 0 or unicodedata.category(text[i - 1])[0] not in "LMN"):
        return said("char_mark")
    if ch in "⟦⟧":  # Latin Modern has them, but KaTeX sets them only in math
        return said("char_bracket")
    if not scripts.is_covered(ch, scripts.script_of(ch), base):
        return said("char_glyph")
    return None


def _joins(text: str, i: int) -> bool:
    """A ZWJ or ZWNJ between two letters (or marks) of one script that uses them (Devanagari, Arabic, …)."""
    if not 0 < i < len(text) - 1:
        return False
    before, after = text[i - 1], text[i + 1]
    script = scripts.script_of(before)
    letters = all(unicodedata.category(c)[0] in "LM" for c in (before, after))
    return letters and script is not None and script.joiners and scripts.script_of(after) is script


# --- titles with inline math ------------------------------------------------
_DOLLAR = re.compile(r"(?<!\\)\$")


def split_math(text: str) -> list[tuple[bool, str]]:
    """A title as (is_math, piece) pairs: ``$...$`` is inline math, ``\\$`` a dollar sign."""
    pieces = _DOLLAR.split(text)
    return [(i % 2 == 1, piece if i % 2 else piece.replace("\\$", "$")) for i, piece in enumerate(pieces) if piece]


def math_problem(text: str) -> str | None:
    """Why the ``$...$`` spans of a title are outside the title-math grammar, or None."""
    if len(_DOLLAR.findall(text)) % 2:
        return said("math_dollar")
    for is_math, piece in split_math(text):
        if not is_math:
            continue
        if not piece.strip():
            return said("math_empty")
        if not piece.isascii():
            return said("math_ascii", source=piece)
        from symattn.input.titlemath import check  # only titles with math need the grammar

        problem = check(piece)
        if problem:
            return problem
    return None
