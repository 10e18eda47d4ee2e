"""Escape user text (titles, token labels) for each output format.

Single-pass character maps, as nbconvert's ``escape_latex``: each character is
replaced once, so no replacement is ever escaped again.
"""

from __future__ import annotations

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

# Symbols that pdflatex cannot read as Unicode (xelatex could, pdflatex cannot).
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

_LATEX_TABLE = str.maketrans({**_LATEX, **_LATEX_SYMBOLS})
_KATEX_TABLE = str.maketrans(_LATEX)
_MARKDOWN_TABLE = str.maketrans(_MARKDOWN)


def escape_latex(text: str) -> str:
    """Escape text for LaTeX text mode (and for ``\\text{}`` inside math)."""
    return text.translate(_LATEX_TABLE)


def escape_katex_text(text: str) -> str:
    """Escape text for ``\\text{}`` inside KaTeX math, which reads Unicode symbols as they are."""
    return text.translate(_KATEX_TABLE)


def escape_markdown(text: str) -> str:
    """Escape text for GitHub-flavoured Markdown prose and table cells."""
    return text.translate(_MARKDOWN_TABLE)


def keep(text: str) -> str:
    """Plain text needs no escaping."""
    return text


ESCAPERS = {"latex": escape_latex, "markdown": escape_markdown, "text": keep}
MATH_TEXT_ESCAPERS = {"latex": escape_latex, "markdown": escape_katex_text, "text": keep}
