"""Escape user text (titles, token labels) for each output format.

Single-pass character maps, as nbconvert's ``escape_latex``: each character is
replaced once, so no replacement is ever escaped again.
"""

from __future__ import annotations

from symattn.input.scripts import runs
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
