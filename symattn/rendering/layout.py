"""Measure before you place: estimated widths of math, and where long lines break.

TeX does not break display math, and KaTeX in a narrow column scrolls; so the
layout decides from the shown strings, deterministically, where a long sum
continues on the next line (``&\\quad +``) and when matrices side by side are
stacked instead. Widths are estimates in TeX points at 10 pt (an em is 10 pt),
a little generous, so that what is estimated to fit does fit.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache, lru_cache

from symattn.input.scripts import script_of

# pt at 10 pt: the narrowest line we set into (12 pt article: 390 pt at 1.2; ctexart: 345 pt at 10.5 pt), less 3%
TEXT_WIDTH = 315.0

# widths of what shows, in pt at 10 pt (Computer Modern math)
_COMMANDS = {
    "times": 12.2,
    "cdot": 7.2,
    "approx": 13.9,
    "le": 13.9,
    "to": 15.0,
    "leftarrow": 15.0,
    "infty": 10.0,
    "quad": 10.0,
    "qquad": 20.0,
    ",": 1.7,
    ";": 2.8,
    " ": 3.3,
    "!": -1.7,
    "top": 7.8,
    "sum": 10.6,
    "alpha": 6.4,
    "mathrm": 0.0,
    "phantom": 0.0,
    "left": 0.0,
    "right": 0.0,
    "ldots": 13.0,
    "surd": 8.3,
    "exp": 16.7,
    "log": 13.9,
    "ln": 10.0,
}
_CHAR = {
    ".": 2.8,
    ",": 4.5,
    "[": 2.8,
    "]": 2.8,
    "(": 3.9,
    ")": 3.9,
    "+": 13.3,
    "-": 13.3,
    "=": 13.9,
    "&": 0.0,
    "{": 0.0,
    "}": 0.0,
    " ": 0.0,
    "^": 0.0,
    "_": 0.0,
    "|": 2.8,
}
# sub- and superscripts are set at 7 pt, in fonts drawn a little wider than 0.7 of 10 pt ones
_SCRIPT = 0.75
_UNARY = "unary"  # a sign at the start of a cell or after an opening: no space around it


def _opens(previous: str) -> bool:
    return previous in ("", "(", "[", "{", "&", "=", "\\\\", "\\approx", "\\left", ",")


_TOKEN = re.compile(r"\\(?:[A-Za-z]+|.)|.", re.S)
_GROUP_COMMANDS = ("text", "mathrm", "operatorname")


@lru_cache(maxsize=4096)
def tex_width(tex: str) -> float:
    """An estimate of the width of inline or display math, in pt at 10 pt."""
    return _width(tex, 1.0)


def tex_width_at(tex: str, scale: float) -> float:
    """The width of math set at a smaller size (``scale`` of 10 pt): its gaps between columns stay."""
    return _width(tex, scale)


def _width(tex: str, scale: float) -> float:
    # a matrix's cells repeat (numbers, names) and a page measures its rows again: short ones are kept
    return _short_width(tex, scale) if len(tex) <= 200 else _measure(tex, scale)


def _measure(tex: str, scale: float) -> float:
    total = 0.0
    i = 0
    previous = ""
    while i < len(tex):
        m = _TOKEN.match(tex, i)
        assert m is not None  # _TOKEN matches any one character
        token = m.group(0)
        i = m.end()
        if token != " ":
            token, previous = (_UNARY if token in "+-" and _opens(previous) else token), token
        if token in ("^", "_"):
            arg, i = _argument(tex, i)
            total += _width(arg, scale * _SCRIPT)
        elif token in ("\\frac", "\\dfrac", "\\tfrac"):
            num, i = _argument(tex, i)
            den, i = _argument(tex, i)
            # display style (our math is mostly display): a fraction's parts at full size, smaller when nested
            inner = 1.0 if token == "\\dfrac" or scale == 1.0 else 0.75
            total += max(_width(num, scale * inner), _width(den, scale * inner)) + 2.4 * scale
        elif token == "\\sqrt":
            arg, i = _argument(tex, i)
            total += _width(arg, scale) + 8.3 * scale
        elif token[1:] in _GROUP_COMMANDS:
            arg, i = _argument(tex, i)
            total += _text_width(arg) * (scale if scale == 1.0 else min(1.0, scale * 1.1))
        elif token == "\\begin":
            name, i = _argument(tex, i)
            body, i = _environment(tex, i, name)
            total += _table_width(name, body, scale)
        elif token.startswith("\\"):
            total += _COMMANDS.get(token[1:], 8.0) * scale
        elif token == _UNARY:
            total += 7.8 * scale
        elif token in _CHAR:
            total += _CHAR[token] * scale
        elif token.isdigit():
            total += 5.0 * scale
        elif ord(token) >= 0x2E80:
            total += 10.0 * scale
        elif "A" <= token <= "Z":
            total += 7.8 * scale  # math italic capitals (Q 7.9, K 8.5, V 5.8)
        else:
            total += 5.6 * scale
    return total


_short_width = lru_cache(maxsize=1 << 16)(_measure)  # at most 65,536 × 200 characters


_ENV = re.compile(r"\\(begin|end)\{([A-Za-z*]+)\}")


def _environment(tex: str, i: int, name: str) -> tuple[str, int]:
    """The body of ``\\begin{name}`` starting at ``i`` (after its name), and the position after its end."""
    if name == "array":
        _, i = _argument(tex, i)  # the column spec
    depth = 1
    for m in _ENV.finditer(tex, i):
        if m.group(2) != name:
            continue
        depth += 1 if m.group(1) == "begin" else -1
        if depth == 0:
            return tex[i : m.start()], m.end()
    return tex[i:], len(tex)


def _split(tex: str, separator: str) -> list[str]:
    """Split at a separator that is not inside braces or a nested environment."""
    parts, depth, start = [], 0, 0
    # only where a brace, \\begin, \\end or the separator starts can anything change: a regex finds those
    for m in _candidates(separator).finditer(tex):
        i = m.start()
        if i < start:  # inside the separator just split at
            continue
        if tex.startswith("\\begin", i) or (tex[i] == "{" and (i == 0 or tex[i - 1] != "\\")):
            depth += 1
        elif tex.startswith("\\end", i) or (tex[i] == "}" and tex[i - 1] != "\\"):
            depth -= 1
        if depth == 0 and tex.startswith(separator, i) and not (separator == "&" and tex[i - 1 : i] == "\\"):
            parts.append(tex[start:i])
            start = i + len(separator)
    parts.append(tex[start:])
    return parts


@cache
def _candidates(separator: str) -> re.Pattern[str]:
    """Every position (overlapping ones too: a lookahead) where a brace, \\begin, \\end or ``separator`` starts."""
    return re.compile(r"(?=\\begin|\\end|[{}]|" + re.escape(separator) + ")")


def _table_width(name: str, body: str, scale: float = 1.0) -> float:
    """Rows split at \\\\, cells at &: the widest row of each column, plus the gaps and brackets.

    The gaps (``\\arraycolsep``) are lengths of their own, the same at every font size.
    """
    rows = [[_width(cell, scale) for cell in _split(row, "&")] for row in _split(body, "\\\\")]
    columns = [max((row[k] for row in rows if k < len(row)), default=0.0) for k in range(max(map(len, rows)))]
    gap = 0.0 if name in ("aligned", "gathered", "split") else 10.0
    brackets = 10.6 if name.endswith("matrix") and name != "matrix" else 0.0
    return sum(columns) + gap * (len(columns) - 1) + brackets * scale


# Computer Modern text at 10 pt, a little generous: lowercase letters average about 4.4 pt
_TEXT_CHAR = {" ": 3.3, "%": 8.3, ".": 2.8, ",": 2.8, ":": 2.8, **dict.fromkeys("abcdefghijklmnopqrstuvwxyz", 4.8)}


# text in words: a command with no argument (\\textbackslash{}) and a script's font macro (\\symattnhangul)
# show nothing, nor the braces of its argument; an escaped character (\\%) shows itself
_TEXT_TOKEN = re.compile(r"\\[A-Za-z]+\{\}|\\symattn[a-z]+|[{}]|\\(.)|(.)", re.S)
# pt per character at 10 pt, measured in each script's font (xelatex), a little generous
_SCRIPT_WIDTH = {
    "tamil": 8.5,
    "ethiopic": 8.6,
    "georgian": 6.8,
    "cyrillic": 6.1,
    "thai": 6.0,
    "armenian": 6.0,
    "greek": 5.7,
}
_INLINE_MATH = re.compile(r"\\\((.*?)\\\)", re.DOTALL)


def text_width(latex: str) -> float:
    """An estimate of the width of a line of LaTeX text with inline math \\( \\), in pt at 10 pt."""
    parts = _INLINE_MATH.split(latex)  # text, math, text, ...
    return sum(tex_width(part) if k % 2 else _text_width(part) for k, part in enumerate(parts))


def _text_width(text: str) -> float:
    width = 0.0
    for m in _TEXT_TOKEN.finditer(text):
        ch = m.group(1) or m.group(2)
        if ch:
            width += _char_width(ch)
    return width


def _char_width(ch: str) -> float:
    if ch.isascii():
        return _TEXT_CHAR.get(ch, 7.2 if ch.isupper() else 5.2)
    if unicodedata.category(ch) in ("Mn", "Me", "Cf"):  # marks sit on their letter; joiners are invisible
        return 0.0
    if unicodedata.east_asian_width(ch) in "WF":  # CJK and Hangul
        return 10.5
    script = script_of(ch)
    return _SCRIPT_WIDTH.get(script.key, 5.2) if script is not None else 5.2


def _argument(tex: str, i: int) -> tuple[str, int]:
    """The braced group (or single token) at ``i``, and the position after it."""
    while i < len(tex) and tex[i] == " ":
        i += 1
    if i >= len(tex):
        return "", i
    if tex[i] != "{":
        m = _TOKEN.match(tex, i)
        assert m is not None  # _TOKEN matches any one character
        return m.group(0), m.end()
    depth = 0
    for j in range(i, len(tex)):
        if tex[j] == "\\":
            continue
        if tex[j] == "{" and (j == 0 or tex[j - 1] != "\\"):
            depth += 1
        elif tex[j] == "}" and tex[j - 1] != "\\":
            depth -= 1
            if depth == 0:
                return tex[i + 1 : j], j + 1
    return tex[i + 1 :], len(tex)


# a sum is broken a little short of the line: the rows of one aligned block share the widest left side
SUM_WIDTH = TEXT_WIDTH - 12.0


def sum_lines(terms: list[str], start: str, end: str, joiner: str = " + ", width: float = SUM_WIDTH) -> str:
    """``start t1 + t2 + … end`` inside an aligned block, continued on new lines where it would be too wide.

    Continuation lines begin ``&\\quad +`` (so they align after the ``=``), and
    the end (``= 0.92``) stays with the last term.
    """
    if not terms:
        return start + end
    terms = terms[:-1] + [terms[-1] + end]
    lines: list[list[str]] = [[terms[0]]]
    used = tex_width(start) + tex_width(terms[0])
    indent = tex_width(_lead(start)) + 10.0 + tex_width(joiner)
    for term in terms[1:]:
        w = tex_width(joiner) + tex_width(term)
        if used + w > width:
            lines.append([term])
            used = indent + tex_width(term)
        else:
            lines[-1].append(term)
            used += w
    out = start + joiner.join(lines[0])
    for line in lines[1:]:
        out += " \\\\\n&\\quad" + joiner.rstrip() + " " + joiner.join(line)
    return out


def _lead(start: str) -> str:
    # what a continuation line is indented by: the width of the left-hand side up to '&'
    return start.split("&", 1)[0]


def fits(*pieces: str, width: float = TEXT_WIDTH) -> bool:
    """Whether math pieces set side by side fit the line."""
    return sum(tex_width(p) for p in pieces) <= width


def side_by_side(pieces: list[str], separator: str = ",\\; ", width: float = TEXT_WIDTH) -> str:
    """Math pieces on one line when they fit; otherwise one under another (``gathered``)."""
    pieces = [p for p in pieces if p]
    if fits(separator.join(pieces), width=width):
        return separator.join(pieces)
    return "\\begin{gathered}" + " \\\\ ".join(relation_lines(p, width=width) for p in pieces) + "\\end{gathered}"


_RELATION = re.compile(r"(=|\\approx)(?=\\begin\{bmatrix\}|\s*\\left\[)")


def relation_lines(piece: str, width: float = TEXT_WIDTH) -> str:
    """``lhs ≈ [matrix]``; when too wide, the matrix goes under its name."""
    if fits(piece, width=width):
        return piece
    *_, match = [None, *_RELATION.finditer(piece)]  # the last relation
    if match is None:
        return piece
    lhs, rhs = piece[: match.start()], piece[match.start() :]
    return "\\begin{aligned}&" + lhs + " \\\\ &" + rhs + "\\end{aligned}"


def chain(pieces: list[str], width: float = TEXT_WIDTH) -> str:
    """``a ≈ b ≈ c`` on one line when it fits; otherwise each link on its own line, aligned left."""
    pieces = [p for p in pieces if p]
    if fits(" ".join(pieces), width=width):
        return " ".join(pieces)
    return "\\begin{aligned}&" + " \\\\ &".join(relation_lines(p, width=width) for p in pieces) + "\\end{aligned}"


def table_fits(*rows: list[str], width: float = TEXT_WIDTH) -> bool:
    """Whether a table of text cells (math in ``\\(...\\)`` or ``$...$``) fits the line, 12 pt between columns."""

    def cell(text: str) -> float:
        math = re.findall(r"\\\((.*?)\\\)|\$(.*?)\$", text)
        rest = re.sub(r"\\\(.*?\\\)|\$.*?\$", "", text)
        return _text_width(rest) + sum(tex_width(a or b) for a, b in math)

    columns = max(len(r) for r in rows)
    widths = [max(cell(r[k]) for r in rows if k < len(r)) for k in range(columns)]
    return sum(widths) + 12.0 * columns <= width


LABEL_WIDTH = 120.0  # pt: the widest a column of labels grows before its labels wrap


def label_column(labels: list[str]) -> str:
    """The column spec of a table's column of labels: ``l``, or one that wraps labels too long for it."""
    return (
        "l" if max((_text_width(a) for a in labels), default=0.0) * 1.1 <= LABEL_WIDTH else f"p{{{LABEL_WIDTH:.0f}pt}}"
    )


def two_columns(first: list[str], second: list[str], width: float = TEXT_WIDTH) -> str:
    """The column spec of a two-column table: ``ll`` when it fits, else the second column wraps.

    The wrapping column takes what the first leaves of ``\\linewidth`` (TeX does
    the sum), so the table fits any host document's line.
    """
    if table_fits(*([a, b] for a, b in zip(first, second)), width=width):
        return "ll"
    label = max(_text_width(a) for a in first) * 1.1 + 4.0
    if label > LABEL_WIDTH:  # a label longer than that wraps (escape_latex_words breaks long words)
        return f"@{{}}p{{{LABEL_WIDTH:.0f}pt}}p{{\\dimexpr\\linewidth-{LABEL_WIDTH:.0f}pt-2\\tabcolsep\\relax}}@{{}}"
    return f"@{{}}lp{{\\dimexpr\\linewidth-{label:.0f}pt-2\\tabcolsep\\relax}}@{{}}"


_DISPLAY = re.compile(r"^\\\[\n(.*?)\n\\\]$", re.S | re.M)
# sizes a display may drop to when no break makes it fit: (command, scale of the width)
# (smaller fonts are set relatively wider, and the 10 pt between a matrix's columns does not shrink)
_SMALLER = (("\\small", 0.93), ("\\footnotesize", 0.86), ("\\scriptsize", 0.8))


def shrink_wide_displays(latex: str, width: float = TEXT_WIDTH + 10.0) -> str:
    """Set a display that is still too wide after every break one size smaller (never the document).

    The last resort of the layout: a single 8-column matrix of four-decimal
    numbers, or one long vector, cannot be broken; ``\\small`` (or smaller)
    around that one display keeps it inside the margins.
    """

    def fit(match: re.Match) -> str:
        if tex_width(match.group(1)) <= width:
            return match.group(0)
        # the first size that fits, else the smallest
        command = next((c for c, scale in _SMALLER if _width(match.group(1), scale) <= width), _SMALLER[-1][0])
        return "\\begingroup" + command + "\n" + match.group(0) + "\n\\endgroup"

    return _DISPLAY.sub(fit, latex)


# The check report's table (templates/report.latex.j2), in em: its gaps (0.8 + 1 + 1.2 + 1.5); its verdict
# column at most, at least while claims line up, and beside wrapped claims at most; the narrowest line a
# report is set into, for that choice (A4 at 2.2 cm margins: 45 em in ctexart's 10.5 pt, 47 em in article's)
_REPORT_GAPS, _REPORT_VERDICT, _REPORT_LEAST_VERDICT, _REPORT_NARROW_VERDICT = 4.5, 14.5, 8.0, 10.0
_REPORT_LINE = {"zh": 45.0, "en": 47.0}
_REPORT_PLACE = 11.0  # a column of wrapped places; up to 14 em a place stands on one line
_LONG_DIGITS = re.compile(r"\d{9,}")
# a break inside a number is taken only where the line has no other (before the number, at a space); 1000, not
# more: a 5000-digit number breaks on 60 lines, and TeX gives up past 2^30 demerits (60 × 5000² is past)
_DIGIT_BREAK = "\\penalty1000 "


def report_columns(
    places: list[str],
    claims: list[str],
    verdicts: list[str],
    values: list[str],
    heads: tuple[str, str, list[str]],
    lang: str,
) -> tuple[str, bool]:
    """The check report's longtable columns, and whether the claims line up on their decimal points;
    ``heads``: the places', the claims' and the exact values' headers (its lines).

    Widths are estimated (in em, generously) except the verdicts': TeX gives them what the line leaves, up
    to 14.5 em. Where that would be under what the verdicts need (their widest, up to 8 em) on A4, a claim
    is too long to line up (a student's 25 calculator digits): the claims then take what the line leaves
    beside verdicts as wide as their widest (up to 10 em), flush left, and break inside their digits
    (:func:`breakable`) with the rest of a number indented. TeX never breaks a number by itself: the row ran
    off the page.
    """

    def em(widths) -> float:
        return max(widths, default=0.0) / 10

    def aligned(numbers: list[str]) -> float:
        halves = [n.partition(".") for n in numbers]
        return em(tex_width(a) for a, _, _ in halves) + em(tex_width("." + b) for _, dot, b in halves if dot)

    place_head, claim_head, value_head = heads
    place = em(text_width(p) for p in places)
    column = "l" if place <= 14 else f">{{\\raggedright\\arraybackslash}}p{{{_REPORT_PLACE:g}em}}"
    fixed = len(str(len(places))) * 0.5 + max(_REPORT_PLACE if place > 14 else place, em([text_width(place_head)]))
    fixed += _REPORT_GAPS + max(aligned(values), em(text_width(line) for line in value_head))
    claims_em = max(aligned(claims), em([text_width(claim_head)]))
    # a bold verdict ("wrong") is about a fifth wider; \\textbf's name is no text
    verdict_em = round(em(text_width(v.replace("\\textbf{", "{")) * 1.2 for v in verdicts) + 0.5, 1)
    start = f"@{{}}r@{{\\hspace{{0.8em}}}}{column}@{{\\hspace{{1em}}}}"
    end = "@{\\hspace{1.5em}}r@{}l@{}"
    ragged = ">{\\raggedright\\arraybackslash}"
    if _REPORT_LINE.get(lang, 47.0) - fixed - claims_em >= min(verdict_em, _REPORT_LEAST_VERDICT):
        rest = round(fixed + claims_em, 1)
        verdict = (
            f"p{{\\dimexpr\\ifdim\\dimexpr\\linewidth-{rest:g}em\\relax>{_REPORT_VERDICT:g}em {_REPORT_VERDICT:g}em"
            f"\\else\\linewidth-{rest:g}em\\fi\\relax}}"
        )
        return f"{start}r@{{}}l@{{\\hspace{{1.2em}}}}{ragged}{verdict}{end}", True
    narrow = min(max(verdict_em, 3.0), _REPORT_NARROW_VERDICT)
    rest = round(fixed + narrow + 0.5, 1)
    hanging = "\\hangindent=1em\\hangafter=1 "
    claim = f">{{\\raggedright\\arraybackslash{hanging}}}p{{\\dimexpr\\linewidth-{rest:g}em\\relax}}"
    return f"{start}{claim}@{{\\hspace{{1.2em}}}}{ragged}p{{{narrow:g}em}}{end}", False


def breakable(tex: str) -> str:
    """A number's LaTeX with a break allowed, where nothing else is, after every fifth digit of a run of
    nine or more."""
    return _LONG_DIGITS.sub(lambda m: _DIGIT_BREAK.join(re.findall(r"\d{1,5}", m.group(0))), tex)
