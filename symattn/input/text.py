"""Which characters a label or title may hold, and the ``$…$`` math of titles.

Checked when input is read, so that no client (pdflatex, xelatex, KaTeX) ever
sees text it cannot set; title math is parsed by :mod:`symattn.input.titlemath`.
"""

from __future__ import annotations

import re

# --- what every output can set ---------------------------------------------
# Labels and titles reach pdflatex, xelatex + ctex and KaTeX (strict). These
# ranges are what all of them set: ASCII, Latin letters with accents, a few
# typographic marks, and Chinese and Japanese (CJK punctuation, kana, Han,
# full-width forms). Greek, Cyrillic, Hebrew, Arabic, emoji and invisible
# format characters are refused rather than dropped by a client.
_TEXT_RANGES = (
    (0x20, 0x7E),  # ASCII
    (0xC0, 0x17F),  # Latin-1 letters and Latin Extended-A (× and ÷ below)
    (0x2013, 0x2014),  # – —
    (0x2018, 0x2019),  # ‘ ’
    (0x201C, 0x201D),  # “ ”
    (0x3001, 0x303F),  # CJK punctuation 、。「」
    (0x3041, 0x30FF),  # kana
    (0x3400, 0x4DBF),  # CJK Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xFF01, 0xFF5E),  # full-width forms （），
)
_NOT_TEXT = {
    0xD7,
    0xF7,  # × ÷ are math, not letters
    0x126,
    0x127,
    0x138,
    0x13F,
    0x140,
    0x149,
    0x166,
    0x167,
    0x17F,
}  # Ħ ħ ĸ Ŀ ŀ ŉ Ŧ ŧ ſ: no T1 glyph


def is_settable(ch: str) -> bool:
    """Whether every output (pdflatex, xelatex + ctex, KaTeX strict) sets this character in text."""
    code = ord(ch)
    return code not in _NOT_TEXT and any(lo <= code <= hi for lo, hi in _TEXT_RANGES)


def unsupported_character(text: str) -> str | None:
    """Why ``text`` cannot be a label or title, or None if every output can set it."""
    import unicodedata

    for ch in text:
        if unicodedata.category(ch) == "Cc":
            return "control characters (such as newlines) are not allowed"
        if not is_settable(ch):
            name = unicodedata.name(ch, "")
            what = f"U+{ord(ch):04X}" + (f" {name}" if name else "")
            shown = repr(ch)[1:-1] if ch.isprintable() else f"\\u{ord(ch):04x}"
            return (
                f"the character '{shown}' ({what}) cannot be set in every output; use Latin letters, "
                "digits, punctuation, or Chinese and Japanese characters"
            )
    return None


# --- titles with inline math ------------------------------------------------
_DOLLAR = re.compile(r"(?<!\\)\$")


def split_math(text: str) -> list[tuple[bool, str]]:
    """A title as (is_math, piece) pairs: ``$...$`` is inline math, ``\\$`` a dollar sign."""
    pieces = _DOLLAR.split(text)
    return [(i % 2 == 1, piece if i % 2 else piece.replace("\\$", "$")) for i, piece in enumerate(pieces) if piece]


def math_problem(text: str) -> str | None:
    """Why the ``$...$`` spans of a title are outside the title-math grammar, or None."""
    if len(_DOLLAR.findall(text)) % 2:
        return "an unclosed $ (write \\$ for a dollar sign)"
    for is_math, piece in split_math(text):
        if not is_math:
            continue
        if not piece.strip():
            return "empty math $$"
        if not piece.isascii():
            return f"math ${piece}$ may hold ASCII only (put words outside the $…$)"
        from symattn.input.titlemath import check  # only titles with math need the grammar

        problem = check(piece)
        if problem:
            return problem
    return None
