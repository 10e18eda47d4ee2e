"""Nothing off the page: displays that break across pages, and matrices in blocks.

TeX cannot break a display (``\\[ … \\]``) across pages, nor a matrix across
lines; a long expansion or a 32-row matrix runs off the bottom of the page,
and a 16-column one off its side. This pass runs over the finished LaTeX (our
own, never user text, which arrives escaped) and, for each display that would
not fit:

- a tall one becomes ``align*`` with ``\\allowdisplaybreaks`` in a group of its
  own, so it may break between its lines (in an author's document too);
- a matrix too wide for the line even one size smaller, or too tall for a
  page, is cut into blocks of columns and rows, each on its own line with a
  note ("columns 1–8 of 16") in the document's language;
- a tall table is cut into tables of at most :data:`TABLE_ROWS` rows, each with
  the header again, with a paragraph break between them where the page may turn.

Displays that fit are left as they are, byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from symattn.input.records import record
from symattn.rendering.layout import TEXT_WIDTH, _environment, _split, tex_width, tex_width_at

# pt at 10 pt: a little less than article's text height on A4 and Letter (about 550 pt), so that a
# display that starts low on a page still breaks where it must
PAGE_HEIGHT = 420.0
LINE_HEIGHT = 14.0  # one line of display math
MATRIX_ROW = 12.5  # one row of a bmatrix
FRACTION_ROW = 26.0  # one row holding a display-style fraction
TABLE_ROWS = 28  # rows of one table (a table cannot break across pages)
SMALLEST = 0.8  # \scriptsize, the smallest size a whole display may be set at (see layout._SMALLER)

# a note on one block: (first row, last row, rows, first column, last column, columns) -> text for \text{}
BlockNote = Callable[[int, int, int, int, int, int], str]

_DISPLAY = re.compile(r"^\\\[\n(.*?)\n\\\]$", re.S | re.M)
_WHOLE = re.compile(r"\A\\begin\{(aligned|gathered)\}(.*)\\end\{\1\}\Z", re.S)
_MATRIX_BEGIN = "\\begin{bmatrix}"
_MATRIX_END = "\\end{bmatrix}"
_BRACKETS = 10.6  # the two brackets of a bmatrix


def paginate(latex: str, note: BlockNote, width: float = TEXT_WIDTH, height: float = PAGE_HEIGHT) -> str:
    """The document with every too-tall display breakable, too-big matrices in blocks, and long tables cut.

    ``height``: what one page (or a slide's frame) holds, in pt at 10 pt.
    """
    latex = _DISPLAY.sub(lambda m: _display(m.group(0), m.group(1), note, width, height), latex)
    return _cut_tables(_max_columns(latex), height)


_MAX_COLUMNS = re.compile(r"\\setcounter\{MaxMatrixCols\}\{(\d+)\}")


def _max_columns(latex: str) -> str:
    """amsmath's MaxMatrixCols as small as the widest matrix left after the blocks.

    Every bmatrix builds a template of MaxMatrixCols columns: at 512, a few hundred blocks take a minute.
    """
    if not _MAX_COLUMNS.search(latex):
        return latex
    widest = 10
    for m in re.finditer(re.escape(_MATRIX_BEGIN), latex):
        inner, _ = _environment(latex, m.end(), "bmatrix")
        widest = max(widest, *(len(_split(row, "&")) for row in _split(inner, "\\\\")))
    return _MAX_COLUMNS.sub(lambda m: f"\\setcounter{{MaxMatrixCols}}{{{min(int(m.group(1)), widest)}}}", latex)


def _display(whole: str, body: str, note: BlockNote, width: float, height: float) -> str:
    rows = [part for row in _rows(body) for part in _side_by_side(row, width, height)]
    if not any(_too_big(row, width, height) for row in rows) and sum(map(_height, rows)) <= height:
        return whole
    # align* sets every row's right side after the widest left side (what comes before '&')
    left = max((tex_width(_split(row, "&")[0]) for row in rows if len(_split(row, "&")) > 1), default=0.0)
    lines: list[str] = []
    for whole_row in _rejoined(rows, width - left):
        # once the display is rebuilt, it is set at full size: a row must fit as it is; a sum continues on
        # the next line before a matrix of it is cut into blocks
        pieces = _sum_lines(whole_row, width - left) if _too_big(_right(whole_row), width - left, height, 1.0) else []
        for row in pieces or [whole_row]:
            big = _too_big(_right(row), width - left, height, 1.0)
            lines.extend(_block_lines(row, note, width - left, height) if big else [_aligned(row)])
    return "\\begingroup\\allowdisplaybreaks\n" + _join(lines, height) + "\n\\endgroup"


def _side_by_side(row: str, width: float, height: float) -> list[str]:
    """A row of relations set side by side (``a = […], \\qquad b \\approx […]``) whose widest matrix, too
    big for the line, comes after the others: the ones before it on rows of their own (12 distances before a
    bias ran 172 pt past the line in front of the bias's first block)."""
    found = _matrix(row) if len(_split(row, "&")) == 1 and _too_big(row, width, height) else None
    if found is None or len(_split(found.before, ", \\qquad ")) < 2:
        return [row]  # the matrix cut into blocks comes first: what follows it goes on lines of its own already
    parts = _split(found.before, ", \\qquad ")
    return [part + "," for part in parts[:-1]] + [parts[-1] + row[len(found.before) :]]


_CONTINUES = ("&\\quad", "&=", "&\\approx", "&\\phantom")
_MORE = "&\\quad + "  # how a sum's next line begins


def _rejoined(rows: list[str], width: float) -> list[str]:
    """Rows with each sum of numbers broken afresh where one of its lines is wider than ``width`` (the line
    less the widest left side, after which align* sets every row's right side); other rows as they are."""
    sums: list[list[str]] = []
    for row in rows:
        if row.startswith(_MORE) and sums:
            sums[-1].append(row)  # a sum's next line
        else:
            sums.append([row])
    out: list[str] = []
    for lines in sums:
        plain = all(_matrix(_right(line)) is None for line in lines)
        if plain and any(tex_width(_right(line)) > width for line in lines):
            joined = " + ".join([lines[0], *(line[len(_MORE) :] for line in lines[1:])])
            out.extend(_sum_lines(joined, width) or [joined])
        else:
            out.extend(lines)
    return out


def _sum_lines(row: str, width: float) -> list[str]:
    """A row that is a sum, broken before its terms (``&\\quad + term``) where the line is full; [] where it
    is no sum, or one that would stay a single line. A term never breaks inside \\left( … \\right)."""
    terms: list[str] = []
    for part in _split(row, " + "):
        if terms and terms[-1].count("\\left") != terms[-1].count("\\right"):
            terms[-1] += " + " + part  # inside \left( … \right): not a term of the row's sum
        else:
            terms.append(part)
    if len(terms) > 1 and _right(terms[0]).strip() in ("", "\\quad"):  # a continuation's lead: its first term
        terms[:2] = [terms[0] + " + " + terms[1]]
    lines = [terms[0]]
    for term in terms[1:]:
        joined = lines[-1] + " + " + term
        if tex_width(_right(joined)) <= width:
            lines[-1] = joined
        else:
            lines.append(_MORE + term)
    return lines if len(lines) > 1 else []


def _join(lines: list[str], page: float) -> str:
    """Lines as align*: the page may turn between equations and between a tall one's lines, never after
    a name whose value is on the next line, nor inside an equation short enough to stay whole.

    A new align* begins about every page (where the page may turn anyway): TeX takes time that grows
    with the square of an alignment's length, and one of a thousand lines takes minutes.
    """
    text, height, first = lines[0], _height(lines[0]), True
    chunk = height
    for line in lines[1:]:
        h = _height(line)
        keep = line.startswith(_CONTINUES) and (first or height + h <= page / 2)
        if not keep and chunk + h > page:
            text += "\n\\end{align*}\n\\begin{align*}\n" + line
            chunk = 0.0
        else:
            text += (" \\\\*\n" if keep else " \\\\\n") + line
        chunk += h
        continues = line.startswith(_CONTINUES)
        height, first = (height + h, False) if continues else (h, True)
    return "\\begin{align*}\n" + text + "\n\\end{align*}"


def _rows(body: str) -> list[str]:
    """The lines of a display: the rows of an aligned or gathered that is the whole body, flattened."""
    match = _WHOLE.match(body.strip())
    if match is None:
        return [body.strip()]
    rows: list[str] = []
    for row in _split(match.group(2), "\\\\"):
        row = row.strip()
        if row:
            rows.extend(_rows(row) if _WHOLE.match(row) else [row])
    return rows


def _right(row: str) -> str:
    """What a row sets after its alignment point."""
    parts = _split(row, "&")
    return "&".join(parts[1:]) if len(parts) > 1 else row


def _aligned(row: str) -> str:
    """A row for align*: rows that had no alignment point are set flush left at the common one."""
    return row if len(_split(row, "&")) > 1 else "&" + row


def _height(row: str) -> float:
    found = _matrix(row)
    if found is None:
        return FRACTION_ROW if "\\dfrac" in row or "\\frac" in row else LINE_HEIGHT
    return _matrix_height(found.cells)


def _matrix_height(cells: list[list[str]]) -> float:
    return sum(FRACTION_ROW if any("frac" in c for c in row) else MATRIX_ROW for row in cells)


def _too_big(row: str, width: float, height: float, scale: float = SMALLEST) -> bool:
    """A row with a matrix too wide for the line (at ``scale``: by default the smallest size), or too tall."""
    found = _matrix(row)
    if found is None:
        return False
    return tex_width_at(row, scale) > width or _matrix_height(found.cells) > height


@record
class _Found:
    before: str
    cells: list[list[str]]
    after: str


def _matrix(row: str) -> _Found | None:
    """The widest top-level bmatrix of a row (not inside braces or another environment), split into its cells."""
    best: _Found | None = None
    best_width = -1.0
    depth, environments, next_at = 0, 0, 0
    for m in _MARKS.finditer(row):  # nothing but a backslash, a brace or a bracket changes what follows
        i = m.start()
        if i < next_at:
            continue
        next_at = i + 1
        if row.startswith("\\\\", i) or row.startswith("\\{", i) or row.startswith("\\}", i):
            next_at = i + 2
            continue
        if row.startswith("\\begin{", i) and not row.startswith(_MATRIX_BEGIN, i):
            environments += 1
        elif row.startswith("\\end{", i) and not row.startswith(_MATRIX_END, i):
            environments -= 1
        if row[i] == "{":
            depth += 1
        elif row[i] == "}":
            depth -= 1
        elif depth == 0 and environments == 0 and row.startswith(_MATRIX_BEGIN, i):
            inner, end = _environment(row, i + len(_MATRIX_BEGIN), "bmatrix")
            cells = [[c.strip() for c in _split(r, "&")] for r in _split(inner, "\\\\")]
            w = tex_width(row[i:end])
            if w > best_width:
                best, best_width = _Found(row[:i], cells, row[end:]), w
            next_at = end
        elif depth == 0 and environments == 0 and row[i] == "[" and not row.endswith("\\left", 0, i):
            # a vector [a,\ b,\ …] as tex_vector writes it: a matrix of one row
            close = _closing_bracket(row, i)
            if close is not None and ",\\ " in row[i:close]:
                cells = [[c.strip() for c in _split(row[i + 1 : close], ",\\ ")]]
                w = tex_width(row[i : close + 1])
                if w > best_width:
                    best, best_width = _Found(row[:i], cells, row[close + 1 :]), w
                next_at = close + 1
    return best


_MARKS = re.compile(r"[\\{}\[]")


def _closing_bracket(row: str, start: int) -> int | None:
    depth = 0
    for j in range(start + 1, len(row)):
        if row[j] == "{" and row[j - 1] != "\\":
            depth += 1
        elif row[j] == "}" and row[j - 1] != "\\":
            depth -= 1
        elif row[j] == "]" and depth == 0:
            return j
        elif row[j] == "[" and depth == 0:
            return None
    return None


def _block_lines(row: str, note: BlockNote, width: float, height: float) -> list[str]:
    """A row whose matrix is too big, as one line per block of that matrix (and its tail on a line of its own).

    ``width`` is what the right side of the row may take (the line less the widest left side).
    """
    found = _matrix(row)
    assert found is not None  # _too_big found it
    before, after = _rstrip_tex(found.before), found.after.strip()
    lead = before if len(_split(before, "&")) > 1 else before + "&"
    # what later lines start with, so that their blocks line up under the first one
    rest = _split(lead, "&")[-1]
    indent = "&\\phantom{" + rest + "}" if rest.strip() else "&"
    cells = found.cells
    n_rows, n_cols = len(cells), max(len(r) for r in cells)
    widest = note(n_rows, n_rows, n_rows, n_cols, n_cols, n_cols)
    room = width - tex_width(rest) - tex_width("_{\\text{" + widest + "}}") - 4.0
    lines: list[str] = []
    for r0, r1 in _row_blocks(cells, height):
        for c0, c1 in _column_blocks(cells, room):
            block = " \\\\ ".join(" & ".join(r[c0:c1]) for r in cells[r0:r1])
            label = note(r0 + 1, r1, n_rows, c0 + 1, c1, n_cols)
            matrix = _MATRIX_BEGIN + block + _MATRIX_END + "_{\\text{" + label + "}}"
            lines.append((lead if not lines else indent) + matrix)
    if after and not re.fullmatch(r"[\s,.;]*", after):
        tail = "&" + after
        lines.extend(_block_lines(tail, note, width, height) if _too_big(after, width, height, 1.0) else [tail])
    elif after:
        lines[-1] += after
    return lines


def _rstrip_tex(tex: str) -> str:
    """``tex`` without its trailing spaces, but a control space (``:\\ ``) keeps its own: stripped, its
    backslash would join the matrix's (``:\\begin``, TeX's line break)."""
    stripped = tex.rstrip()
    odd = (len(stripped) - len(stripped.rstrip("\\"))) % 2
    return stripped + " " if odd and stripped != tex else stripped


def _row_blocks(cells: list[list[str]], page: float) -> list[tuple[int, int]]:
    blocks, start, height = [], 0, 0.0
    for k, row in enumerate(cells):
        h = FRACTION_ROW if any("frac" in c for c in row) else MATRIX_ROW
        if height + h > page and k > start:
            blocks.append((start, k))
            start, height = k, 0.0
        height += h
    blocks.append((start, len(cells)))
    return blocks


def _column_blocks(cells: list[list[str]], width: float) -> list[tuple[int, int]]:
    """Columns grouped so that each block fits ``width`` (always at least one column per block)."""
    n_cols = max(len(r) for r in cells)
    # 3% over the estimate, and the 10 pt between columns
    widths = [1.03 * max(tex_width(r[k]) for r in cells if k < len(r)) + 10.0 for k in range(n_cols)]
    blocks, start, used = [], 0, _BRACKETS
    for k, w in enumerate(widths):
        if used + w > width and k > start:
            blocks.append((start, k))
            start, used = k, _BRACKETS
        used += w
    blocks.append((start, n_cols))
    return _even(blocks, n_cols)


def _even(blocks: list[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    # the same number of blocks, as even as possible: 8 + 8 columns rather than 12 + 4
    count = len(blocks)
    size, extra = divmod(n, count)
    bounds = [0]
    for k in range(count):
        bounds.append(bounds[-1] + size + (1 if k < extra else 0))
    return list(zip(bounds, bounds[1:]))


# --- tables -------------------------------------------------------------------
def _table_row_height(row: str) -> float:
    """A table row's height: one line, or as many as a wrapping (``\\raggedright``) cell needs."""
    if "\\raggedright" not in row:
        return LINE_HEIGHT
    lines = -(-int(tex_width(_split(row, "&")[-1])) // int(TEXT_WIDTH * 0.6))
    return LINE_HEIGHT * max(1, lines)


_TABLE = re.compile(
    r"^((?:\\noindent)?\\begin\{tabular\}\{[^\n]*\}\n\\hline\n)([^\n]*\\\\\n\\hline\n)((?:[^\n]*(?:\\\\|\\tabularnewline)\n)+)"
    r"(\\hline\n\\end\{tabular\})$",
    re.M,
)


def _cut_tables(latex: str, page: float) -> str:
    """A table of more than TABLE_ROWS rows as several tables, each with the header, a paragraph apart."""

    def cut(match: re.Match) -> str:
        begin, header, body, end = match.groups()
        rows = body.splitlines(keepends=True)
        heights = [_table_row_height(row) for row in rows]
        if len(rows) <= TABLE_ROWS and sum(heights) <= page:
            return match.group(0)
        pieces, start, used = [], 0, 0.0
        for k, h in enumerate(heights):
            if (used + h > page or k - start == TABLE_ROWS) and k > start:
                pieces.append("".join(rows[start:k]))
                start, used = k, 0.0
            used += h
        pieces.append("".join(rows[start:]))
        return "\n\n".join(begin + header + piece + end for piece in pieces)

    return _TABLE.sub(cut, latex)
