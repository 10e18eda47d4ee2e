"""Escape user text (titles, token labels) for each output format.

Single-pass character maps, as nbconvert's ``escape_latex``: each character is
replaced once, so no replacement is ever escaped again.
"""

from __future__ import annotations

from symattn.input.scripts import is_joiner, is_mark, runs, script_of
from symattn.input.text import CONTROL_ESCAPES, show_controls

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

_SHOWN = CONTROL_ESCAPES  # controls from outside text: shown as escapes in every format (input.text)
_LATEX_TABLE = str.maketrans({**_LATEX, **_LATEX_SYMBOLS, **{ch: r"\textbackslash{}" + s for ch, s in _SHOWN.items()}})
_KATEX_TABLE = str.maketrans({**_LATEX, **{ch: r"\textbackslash{}" + s for ch, s in _SHOWN.items()}})
_MARKDOWN_TABLE = str.maketrans({**_MARKDOWN, **{ch: "\\\\" + s for ch, s in _SHOWN.items()}})

# a right-to-left run in Markdown and HTML: isolated, as \beginR … \endR isolates it in the PDF
_RLI, _PDI = "\u2067", "\u2069"


def escape_latex_words(text: str) -> str:
    """User text for LaTeX prose and tables (``escape_latex``), where a word too long for a line (a label of
    40 signs, a path) may break every few letters."""
    if len(text) > _LONG_WORD and any(len(word) > _LONG_WORD for word in text.split(" ")):
        return _BREAK.join(escape_latex(piece) for piece in _pieces(text))
    return escape_latex(text)


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
    """Escape text for LaTeX text mode (and for ``\\text{}`` inside math).

    A run in a script that needs its own font is ``\\symattn<script>{…}``, a
    macro that the standalone preamble defines (``input.scripts``).
    """
    if text.isascii():
        return text.translate(_LATEX_TABLE)
    return "".join(
        piece.translate(_LATEX_TABLE) if font is None else f"\\symattn{font.key}{{{piece.translate(_LATEX_TABLE)}}}"
        for font, piece in runs(text)
    )


def escape_katex_text(text: str) -> str:
    """Escape text for ``\\text{}`` inside KaTeX math, which reads Unicode symbols as they are."""
    return text.translate(_KATEX_TABLE)


def escape_markdown(text: str) -> str:
    """Escape text for GitHub-flavoured Markdown prose and table cells; right-to-left runs are isolated."""
    if text.isascii():
        return text.translate(_MARKDOWN_TABLE)
    pieces = ((font, piece.translate(_MARKDOWN_TABLE)) for font, piece in runs(text))
    return "".join(_RLI + piece + _PDI if font is not None and font.rtl else piece for font, piece in pieces)


def escape_text(text: str) -> str:
    """Plain text: only its controls shown as escapes."""
    return show_controls(text)


ESCAPERS = {"latex": escape_latex, "markdown": escape_markdown, "text": escape_text}
MATH_TEXT_ESCAPERS = {"latex": escape_latex, "markdown": escape_katex_text, "text": escape_text}
