"""The plain text of a LaTeX heading, for its PDF bookmark (hyperref's ``texorpdfstring``): its math written
out from the title-math parse tree, its escapes read back.

hyperref cannot read math or macros into a PDF string ("Token not allowed in a PDF string") and drops them,
so "scale \\(S / \\sqrt{d_k}\\)" would read "scale S / dk". Math is written out (√, ᵀ, ∞), escaped text is
unescaped, and the result is escaped again with the text commands that hyperref's PDF strings know."""

from __future__ import annotations

import re

# the text escapes of rendering.escape, read back
_UNESCAPED = {
    r"\textbackslash{}": "\\",
    r"\textasciicircum{}": "^",
    r"\textasciitilde{}": "~",
    r"\textless{}": "<",
    r"\textgreater{}": ">",
    r"\textbar{}": "|",
    "{[}": "[",
    "{*}": "*",
}
_TOKEN = re.compile(
    r"\\\((?P<math>.*?)\\\)"
    r"|\\ensuremath(?=\{)"
    r"|(?P<escaped>" + "|".join(re.escape(k) for k in _UNESCAPED) + r")"
    r"|\\(?P<char>[{}#$%&_])"
    r"|\\[A-Za-z]+\s*"  # \raggedright, a script's font macro \symattn…{…}: its text stays
    r"|[{}]"
    r"|(?P<text>[^\\{}]+)",
    re.S,
)
# hyperref's PDF strings read these text commands; other characters go as they are (UTF-16)
_PDF_STRING = str.maketrans(
    {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "#": r"\#", "$": r"\$", "%": r"\%", "&": r"\&", "_": r"\_"}
    | {"^": r"\textasciicircum{}", "~": r"\textasciitilde{}"}
)


def _math(source: str) -> str:
    from symattn.input.titlemath import TitleMathError, parse, plain  # only headings with math need the grammar

    try:
        return plain(parse(source))
    except TitleMathError:  # math of ours beyond the title grammar (\left( ): its letters and digits
        return re.sub(r"\\[A-Za-z]+|[{}\\]", "", source)


def heading_text(latex: str) -> str:
    """The words of a LaTeX heading, as plain text (before it is escaped for a PDF string)."""
    out, i = [], 0
    while i < len(latex):
        m = _TOKEN.match(latex, i)
        if m is None:  # a lone backslash: keep it, as text
            out.append(latex[i])
            i += 1
            continue
        i = m.end()
        if m["math"] is not None:
            out.append(_math(m["math"]))
        elif m.group().startswith("\\ensuremath"):
            depth, start = 0, i
            while i < len(latex):
                depth += {"{": 1, "}": -1}.get(latex[i], 0)
                i += 1
                if depth == 0:
                    break
            out.append(_math(latex[start + 1 : i - 1]))
        elif m["escaped"]:
            out.append(_UNESCAPED[m["escaped"]])
        elif m["char"]:
            out.append(m["char"])
        elif m["text"]:
            out.append(m["text"])
    return re.sub(r"\s+", " ", "".join(out)).strip()


# hyperref's command, for a document without hyperref: the heading's TeX (a no-op where hyperref is loaded)
PROVIDE_TEXORPDFSTRING = "\\providecommand\\texorpdfstring[2]{#1}"


def bookmarked(latex: str) -> str:
    """``latex`` as a heading's argument: with ``\\texorpdfstring`` and its plain text where it holds a macro."""
    if "\\" not in latex:
        return latex
    return f"\\texorpdfstring{{{latex}}}{{{heading_text(latex).translate(_PDF_STRING)}}}"
