"""Escape user text (titles, token labels) for each output format.

Single-pass character maps, as nbconvert's ``escape_latex``: each character is
replaced once, so no replacement is ever escaped again.
"""

from __future__ import annotations

import re
import unicodedata

from symattn.input.scripts import is_joiner, is_mark, runs, script_of
from symattn.input.text import CONTROL_ESCAPES

# Text mode of LaTeX. The same escapes work inside \text{} in KaTeX. "[" and "*" are
# braced so that text after a line break (\\) or \item is never read as its option.
_LATEX = {
    "[": "{[}",
    "*": "{*}",
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "#": r"\#",
    "$": r"\$",
    "%": r"\%",
    "&": r"\&",
    "_": r"\_",
    "^": r"\textasciicircum{}",
    "~": r"\textasciitilde{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
}

# Symbols that pdflatex cannot read as Unicode (xelatex could, pdflatex cannot); input.scripts.MATH_SYMBOLS
# lets labels hold them.
_LATEX_SYMBOLS = {
    "≈": r"\ensuremath{\approx}",
    "→": r"\ensuremath{\rightarrow}",
    "←": r"\ensuremath{\leftarrow}",
    "×": r"\ensuremath{\times}",
    "·": r"\ensuremath{\cdot}",
    "−": r"\ensuremath{-}",
    "√": r"\ensuremath{\surd}",
    "∞": r"\ensuremath{\infty}",
}

# CommonMark backslash escapes: any ASCII punctuation may be escaped; these matter.
_MARKDOWN = {ch: "\\" + ch for ch in "\\`*_[]<>#|~$&!{}"}

# TeX's text fonts turn ' and ` into curly quotes (!` into ¡): LaTeX's own straight ones keep them as typed.
# KaTeX has neither, so there a single ' or ` stays curly, and only the pairs below are kept apart.
_QUOTES = {"'": r"\textquotesingle{}", "`": r"\textasciigrave{}"}
# the pairs a font's ligatures would join (-- into an en dash, ,, into „ in T1, '' into ”): {} keeps them apart
_PAIRS = re.compile(r"-(?=-)|,(?=,)")
_KATEX_PAIRS = re.compile(r"-(?=-)|'(?=')|`(?=`)")

# controls from outside text: shown as escapes in every format (input.text); a line break or tab too, as user text
# is one line (a label, a file's name in a one-line note, a roster's name in a table cell)
_SHOWN = {**CONTROL_ESCAPES, "\n": "n", "\r": "r", "\t": "t"}
_SHOW = str.maketrans({ch: "\\" + s for ch, s in _SHOWN.items()})
_LATEX_TABLE = str.maketrans({**_LATEX, **_LATEX_SYMBOLS, **{ch: r"\textbackslash{}" + s for ch, s in _SHOWN.items()}})
_USER_TABLE = str.maketrans(  # user text: every character as typed, quotes too
    {**_LATEX, **_QUOTES, **_LATEX_SYMBOLS, **{ch: r"\textbackslash{}" + s for ch, s in _SHOWN.items()}}
)
_KATEX_TABLE = str.maketrans({**_LATEX, **{ch: r"\textbackslash{}" + s for ch, s in _SHOWN.items()}})
_MARKDOWN_TABLE = str.maketrans({**_MARKDOWN, **{ch: "\\\\" + s for ch, s in _SHOWN.items()}})

# a right-to-left run in Markdown and HTML: isolated, as \beginR … \endR isolates it in the PDF
_RLI, _PDI = "\u2067", "\u2069"


def escape_latex_words(text: str) -> str:
    """User text for LaTeX prose and tables (``escape_latex``), where a word too long for a line (a label of
    40 signs, a path) may break every few letters."""
    if len(text) > _LONG_WORD and any(len(word) > _LONG_WORD for word in text.split(" ")):
        return _BREAK.join(escape_latex_user(piece) for piece in _pieces(text))
    return escape_latex_user(text)


# a word longer than this breaks after each _PIECE letters in a row where nothing joins them
_LONG_WORD, _PIECE = 20, 10
# a break that gives its line room to stretch (a line of nothing but a label has no space to stretch), and none
# where the line goes on: the second glue takes back what the first gave
_BREAK = "\\hskip0pt plus4em\\penalty0\\hskip0pt plus-4em\\relax "
_UNSHAPED = {None, "latin", "greek", "cyrillic"}  # scripts whose letters stand alone: a break never reshapes them


def _pieces(text: str) -> list[str]:
    pieces = [""]
    for k, word in enumerate(text.split(" ")):
        pieces[-1] += (" " if k else "") + word[:1]
        since = 1
        for before, ch in zip(word, word[1:]):
            apart = not (is_mark(ch) or is_joiner(ch) or is_joiner(before))
            scripts = {getattr(script_of(c), "key", None) for c in (before, ch)}
            if not scripts <= _UNSHAPED:
                since = 0  # Chinese and Japanese break anyway; Arabic and Indic runs are never cut
            if len(word) > _LONG_WORD and since >= _PIECE and apart:
                pieces.append(ch)
                since = 1
            else:
                pieces[-1] += ch
                since += 1
    return pieces


def escape_latex(text: str) -> str:
    """Escape our own prose for LaTeX text mode (and for ``\\text{}`` inside math): its apostrophes and dashes
    are typeset as TeX sets them. User text goes through :func:`escape_latex_user`.

    A run in a script that needs its own font is ``\\symattn<script>{…}``, a
    macro that the standalone preamble defines (``input.scripts``).
    """
    return _latex(text, _LATEX_TABLE, None)


def escape_latex_user(text: str) -> str:
    """``escape_latex`` for user text (titles, labels, names): every character shown as typed, no font's
    ligature or curly quote in its place (a--b stays a--b, not a–b)."""
    return _latex(text, _USER_TABLE, _PAIRS)


def _latex(text: str, table: dict[int, str], pairs: re.Pattern[str] | None) -> str:
    if text.isascii():
        return _apart(text.translate(table), pairs)
    return "".join(
        _apart(piece.translate(table), pairs)
        if font is None
        else f"\\symattn{font.key}{{{_apart(piece.translate(table), pairs)}}}"
        for font, piece in runs(text)
    )


def _apart(tex: str, pairs: re.Pattern[str] | None) -> str:
    """The escaped text with {} between the characters a font's ligatures would join."""
    return pairs.sub(lambda m: m.group() + "{}", tex) if pairs is not None and pairs.search(tex) else tex


def escape_katex_text(text: str) -> str:
    """Escape our own prose for ``\\text{}`` inside KaTeX math, which reads Unicode symbols as they are."""
    return text.translate(_KATEX_TABLE)


def escape_katex_user(text: str) -> str:
    """``escape_katex_text`` for user text: no two characters joined by KaTeX's ligatures (-- stays --; a
    single ' or ` stays KaTeX's curly one, as KaTeX has no straight quote); Greek in math (:func:`_greek`)."""
    tex = _apart(text.translate(_KATEX_TABLE), _KATEX_PAIRS)
    return _GREEK_RUN.sub(_greek, tex) if _GREEK_RUN.search(tex) else tex


# KaTeX's \text{} knows no Greek letter (strict mode refuses one); its math knows these, and their tonos and
# dialytika as accents. Other Greek (polytonic marks, archaic letters) is left as it is.
_GREEK_MATH = set("ΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩαβγδεζηθικλμνξοπρςστυφχψωϑϕϖϱϵ")
_GREEK_MARKS = {"\u0301": "\\acute", "\u0308": "\\ddot"}  # tonos (as an acute), dialytika
_GREEK_RUN = re.compile("[\u0370-\u03ff]+")


def _greek(run: re.Match[str]) -> str:
    """A run of Greek letters as math inside \\text{}: \\(λ\\acute{ο}γος\\) (no $: Markdown's math ends at one), as far
    as KaTeX's math has them."""
    out, math = "", ""
    for ch in run.group():
        decomposed = unicodedata.normalize("NFD", ch)
        base, marks = decomposed[0], decomposed[1:]
        if base not in _GREEK_MATH or any(m not in _GREEK_MARKS for m in marks):
            out += (f"\\({math}\\)" if math else "") + ch
            math = ""
            continue
        for mark in marks:
            base = f"{_GREEK_MARKS[mark]}{{{base}}}"
        math += base
    return out + (f"\\({math}\\)" if math else "")


def escape_markdown(text: str) -> str:
    """Escape text for GitHub-flavoured Markdown prose and table cells; right-to-left runs are isolated."""
    if text.isascii():
        return text.translate(_MARKDOWN_TABLE)
    pieces = ((font, piece.translate(_MARKDOWN_TABLE)) for font, piece in runs(text))
    return "".join(_RLI + piece + _PDI if font is not None and font.rtl else piece for font, piece in pieces)


def escape_text(text: str) -> str:
    """Plain text: only its controls (and line breaks) shown as escapes."""
    return text.translate(_SHOW)


ESCAPERS = {"latex": escape_latex, "markdown": escape_markdown, "text": escape_text}  # our prose
MATH_TEXT_ESCAPERS = {"latex": escape_latex, "markdown": escape_katex_text, "text": escape_text}
USER_ESCAPERS = {"latex": escape_latex_user, "markdown": escape_markdown, "text": escape_text}  # user text
USER_MATH_TEXT_ESCAPERS = {"latex": escape_latex_user, "markdown": escape_katex_user, "text": escape_text}
