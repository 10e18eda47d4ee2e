"""Read a rendered Markdown derivation back as numbers: every shown matrix and every expanded line.

This is the reader's side of the page, written without symattn's code: it knows only the notation the
page uses (``0.9\\times 1.0 + 0.1\\times 0.2 = 0.92``, ``\\dfrac{2.028}{4.862}``, ``0.417\\cdot[10,\\ 0]``).
Each line becomes a :class:`Line` that names the quantity it computes, its terms as printed, its result
and relation, and the terms it should have had: the entries of the matrices shown before it that the
line's name claims (the row of Q and the column of Kᵀ, and so on).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal

NUM = r"(?:-?\d+(?:\.\d+)?(?:\\times 10\^\{-?\d+\})?|-\\infty)"
_OPERAND = re.compile(rf"\\left\(({NUM})\\right\)|({NUM})")
_REL = re.compile(r"\s*(?<![\\a-z])(=|\\approx)\s*")
_BMATRIX = re.compile(r"\\begin\{bmatrix\}(.*?)\\end\{bmatrix\}")
_LABEL = r"\\text\{([^{}]*)\}"


def number(text: str) -> Decimal | None:
    """A shown number as a Decimal with its digits (None for −∞)."""
    text = text.strip()
    if text == "-\\infty":
        return None
    m = re.fullmatch(r"(-?\d+(?:\.\d+)?)(?:\\times 10\^\{(-?\d+)\})?", text)
    assert m, f"not a number: {text!r}"
    return Decimal(m[1]).scaleb(int(m[2] or 0))


def operand(text: str) -> Decimal | None:
    m = _OPERAND.fullmatch(text.strip())
    assert m, f"not an operand: {text!r}"
    return number(m[1] or m[2])


def products(text: str) -> tuple[list[tuple[Decimal, Decimal]], Decimal | None]:
    """``a\\times b + c\\times d (+ bias)``: the pairs, and a last term without a product (a bias)."""
    pairs, bias = [], None
    for term in split_sum(text):
        parts = _split_top(term, "\\times ")
        if len(parts) == 2:
            pairs.append((operand(parts[0]), operand(parts[1])))
        else:
            assert bias is None and len(parts) == 1, term
            bias = operand(parts[0])
    return pairs, bias


def _split_top(text: str, sep: str) -> list[str]:
    """Split at ``sep`` outside \\left( \\right)."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        if text.startswith("\\left(", i):
            depth, i = depth + 1, i + 6
        elif text.startswith("\\right)", i):
            depth, i = depth - 1, i + 7
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i = start = i + len(sep)
        else:
            i += 1
    return [p.strip() for p in parts + [text[start:]]]


def split_sum(text: str) -> list[str]:
    return _split_top(text, " + ")


def vector(text: str) -> list[Decimal | None]:
    text = text.strip()
    assert text.startswith("[") and text.endswith("]"), text
    return [number(x) for x in text[1:-1].split(",\\ ")]


def matrix(body: str) -> list[list[Decimal | None]]:
    return [[number(x) for x in row.split("&")] for row in body.split("\\\\")]


@dataclass
class Line:
    """One expanded line: ``quantity[where] rel terms … rel result``."""

    quantity: str  # "S", "Q", "exp", "sum", "A", "prod", "O", "OUT", "dV", "dA", "JdA", "r", "dZ", "dQ", "dK", …
    where: tuple  # (head, i, j, …): head 0 outside the heads
    value: object  # what the reader computes the result from: pairs, a list of terms, (a, b) of a fraction …
    form: str  # "products", "sum", "exp", "ratio", "compact", "shift"
    result: Decimal | None
    rel: str  # "=" or "≈": the relation in front of the result
    expected: object = None  # the pairs the name claims, from the matrices shown before the line
    lead: str = ""  # the relation between the name and the terms: = only where the terms are the whole value


@dataclass
class Shown:
    """A matrix as shown, with its relation (= exact, ≈ rounded)."""

    name: str
    where: tuple
    rel: str
    rows: list


@dataclass
class Page:
    tokens: list[str]
    keys: list[str]
    lines: list[Line] = field(default_factory=list)
    matrices: list[Shown] = field(default_factory=list)
    percents: list[tuple[list[Decimal], list[Decimal]]] = field(default_factory=list)  # (shown %, weights)
    sqrt: Decimal | None = None  # √d_k as shown in the setup


def _rel(text: str) -> str:
    return "=" if text.strip() == "=" else "≈"


def _chain(text: str) -> list[tuple[str, str]]:
    """``&= a = b \\approx c`` as [("=", a), ("=", b), ("≈", c)]."""
    parts = _REL.split(text)
    assert parts[0].strip("& ") == "", text
    return [(_rel(parts[k]), parts[k + 1].strip()) for k in range(1, len(parts), 2)]


def _rows(block: str) -> list[str]:
    """The statements of an aligned block: wrapped sums (``&\\quad + …``) and chains (``&= …``) joined."""
    body = block.split("\\begin{aligned}", 1)[1].rsplit("\\end{aligned}", 1)[0]
    out: list[str] = []
    for row in (r.strip() for r in re.split(r"\\\\\n?", body)):
        if not row:
            continue
        if row.startswith("&\\quad"):
            out[-1] += " " + row[len("&\\quad") :].strip()
        elif row.startswith("&"):
            out[-1] += " " + row[1:].strip()
        else:
            out.append(row)
    return out


_NAMED = re.compile(
    r"(?:\\\\ |,\\; |,\\quad |\\begin\{gathered\}|^)(?P<lhs>[^&]*?)"
    r"(?P<rel>=|\\approx)\s*\\begin\{bmatrix\}(?P<body>.*?)\\end\{bmatrix\}"
)
_NAMES = {
    "Q": "Q", "K": "K", "V": "V", "X": "X", "X_{kv}": "X_kv", "W_Q": "W_Q", "W_K": "W_K", "W_V": "W_V",
    "W_O": "W_O", "K^\\top": "KT", "S": "S", "A": "A", "T": "T", "Z": "Zm", "dO": "dO", "dV": "dV", "dA": "dA",
    "dZ": "dZ", "dS": "dS", "dQ": "dQ", "dK": "dK", "dX": "dX", "dX_{kv}": "dX_kv", "dC": "dC", "dW_O": "dW_O",
    "db_O": "db_O", "dW_Q": "dW_Q", "db_Q": "db_Q", "dW_K": "dW_K", "db_K": "db_K", "dW_V": "dW_V", "db_V": "db_V",
}  # fmt: skip


def _matrix_name(lhs: str) -> tuple[str, str | None] | None:
    """The quantity a display names before its bmatrix (``dW_O = C^\\top dO \\approx`` is dW_O)."""
    lhs = re.split(r",\\quad |,\\; | \\\\ ", lhs)[-1].strip()  # the last of several things side by side
    if lhs.startswith("\\frac{S}"):
        return "Z", None
    if lhs.startswith("\\mathrm{Concat}"):
        return "C", None
    if re.fullmatch(r"\\text\{[^{}]*\} = AV", lhs):
        return "O", None
    if re.fullmatch(r"\\text\{[^{}]*\}", lhs):
        return "OUT", None
    m = re.match(rf"J_\{{{_LABEL}\}}(\\,dA)?", lhs)
    if m:
        return ("agree" if m[2] else "J"), m[1]
    m = re.match(r"dO\^\{\((\d+)\)\}", lhs)
    if m:
        return "dO", None
    name = re.split(r" = |\s", lhs, maxsplit=1)[0]
    return (_NAMES[name], None) if name in _NAMES else None


def read(markdown: str, tokens: list[str], keys: list[str]) -> Page:
    """Every matrix and expanded line of a rendered Markdown derivation, in the order of the page."""
    walker = _Walker(Page(tokens, keys))
    for part in re.split(r"(?ms)^(\$\$\n.*?\n\$\$)$", markdown):
        if part.startswith("$$\n"):
            walker.display(part[3:-3].strip())
        else:
            for line in part.splitlines():
                walker.prose(line)
    return walker.page


class _Walker:
    """Walks the page in order, keeping the latest matrix of each name for each head (0: outside heads)."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.shown: dict[tuple[int, str], list] = {}
        self.head = 0  # 1-based in a head's section (forward or backward), else 0
        self.columns: tuple[int, int] = (0, 0)  # the head's columns of Q, K and V
        self.output_projection = False  # lines name Output entries of Concat W_O + b_O
        self.alpha: dict[tuple[int, int], list] = {}  # each row's weights, from its softmax fractions
        self.softmax: list = []  # the current row's shift, exps and sum, until its fractions name the row
        self.r: Decimal | None = None

    def get(self, name: str) -> list:
        if (self.head, name) in self.shown:
            return self.shown[(self.head, name)]
        rows = self.shown[(0, name)]
        if self.head and name in ("Q", "K", "V"):
            a, b = self.columns
            return [row[a:b] for row in rows]
        return rows

    def keys_matrix(self) -> list:
        """K as the lines pair it: a head's Kᵀ, shown in its own section, or K."""
        if (self.head, "KT") in self.shown:
            return [list(col) for col in zip(*self.shown[(self.head, "KT")])]
        return self.get("K")

    # --- where the page is ------------------------------------------------------------------------------

    def prose(self, line: str) -> None:
        m = re.search(r"\\sqrt\{d_k\} = \\sqrt\{\d+\} (?:\\approx|=) (\d+(?:\.\d+)?)", line)
        if m and self.page.sqrt is None:
            self.page.sqrt = Decimal(m[1])
        if re.match(r"## ", line):  # a step of the whole document, or a head's section (columns a–b, column a)
            m = re.search(r"(\d+)\D+?(\d+)–(\d+)", line) or re.search(r"^## (?:Head |第 |头 )(\d+)\D+?(\d+)()", line)
            self.head, self.columns = (int(m[1]), (int(m[2]) - 1, int(m[3] or m[2]))) if m else (0, (0, 0))
        if line.startswith("#"):
            self.output_projection = False
        if line.startswith("| ") and line.count("%") == len(self.page.keys) and "---" not in line:
            shown = [Decimal(x.strip().rstrip("%")) for x in line.strip("| ").split("|")[1:]]
            self.page.percents.append((shown, self.last_alpha))

    # --- displays ---------------------------------------------------------------------------------------

    def display(self, block: str) -> None:
        if block.startswith("\\begin{aligned}") and "\\begin{bmatrix}" not in block:
            for row in _rows(block):
                self.statement(row)
            return
        if block.startswith("\\begin{aligned}&"):  # a long name and its matrix, broken after the name
            block = block[len("\\begin{aligned}&") : -len("\\end{aligned}")].replace(" \\\\ &", " ")
        if block.startswith("z - "):
            m = re.fullmatch(rf"z - ({NUM}|\\left\({NUM}\\right\)) (=|\\approx) (\[.*\])", block)
            assert m, block
            self.softmax.append(("shift", operand(m[1]), vector(m[3]), _rel(m[2])))
            return
        if block.startswith("\\alpha_{\\text") and "\\dfrac" in block:
            self.fractions(block)
            return
        if "W_O=" in block:
            self.output_projection = True
        for m in re.finditer(r"(b_[QKVO])=(\[.*?\])", block):  # before the matrices that add them
            self.record(m[1], None, "=", [vector(m[2])])
        for m in _NAMED.finditer(block):
            named = _matrix_name(m["lhs"])
            if named is not None:
                self.record(named[0], named[1], _rel(m["rel"]), matrix(m["body"]))
        m = re.search(r"\\frac\{S\}\{(\d+(?:\.\d+)?)\}", block)
        if m:
            self.page.sqrt = Decimal(m[1])  # by hand: S over the shown root

    def record(self, name: str, label: str | None, rel: str, rows: list) -> None:
        i = None if label is None else self.page.tokens.index(label)
        self.page.matrices.append(Shown(name, (self.head,) if i is None else (self.head, i), rel, rows))
        self.shown[(self.head, name if label is None else f"{name}:{label}")] = rows

    def fractions(self, block: str) -> None:
        """α_i ≈ [e_j / sum] ≈ [weights]: the row's shift, exps and sum are named by it."""
        m = re.fullmatch(
            rf"\\alpha_\{{{_LABEL}\}} (=|\\approx) \\begin\{{bmatrix\}}(.*?)\\end\{{bmatrix\}} (=|\\approx) "
            r"\\begin\{bmatrix\}(.*?)\\end\{bmatrix\}",
            block,
        )
        assert m, block
        i = self.page.tokens.index(m[1])
        Z = (self.shown.get((self.head, "Zm")) or self.get("Z"))[i]  # after the mask, where there is one
        exps, total = [], None
        for item in self.softmax:
            if item[0] == "shift":
                _, shift, shifted, rel = item
                for j, (z, y) in enumerate(zip(Z, shifted)):
                    self.line("z", (i, j), (z, shift), "shift", y, rel + "v")
                Z = shifted
            elif item[0] == "exp":
                _, z, e, rel = item
                j = len(exps)
                self.line("exp", (i, j), z, "exp", e, rel, Z[j])
                exps.append(e)
            else:
                total = item[1]
                self.line("sum", (i,), exps, "sum", total, item[2])
        self.softmax = []
        fracs = re.findall(rf"\\dfrac\{{({NUM})\}}\{{({NUM})\}}", m[3])
        weights = matrix(m[5])[0]
        self.alpha[(self.head, i)] = self.last_alpha = weights
        for j, ((a, b), w) in enumerate(zip(fracs, weights)):
            self.line("A", (i, j), (number(a), number(b)), "ratio", w, _rel(m[4]) + "v", (exps[j], total))

    # --- expanded lines ---------------------------------------------------------------------------------

    def line(self, quantity, where, value, form, result, rel, expected=None) -> None:
        self.page.lines.append(Line(quantity, (self.head, *where), value, form, result, rel, expected))

    def products(self, quantity, where, chain, expected, bias=None) -> None:
        self.line(quantity, where, products(chain[0][1]), "products", number(chain[-1][1]), chain[-1][0],
                  (expected, bias))  # fmt: skip
        self.page.lines[-1].lead = chain[0][0]

    def statement(self, row: str) -> None:
        lhs, _, rest = row.partition("&")
        lhs, chain = lhs.strip(), _chain("&" + rest)
        tokens, keys = self.page.tokens, self.page.keys
        label = lambda m, k: tokens.index(m[k])  # noqa: E731
        key = lambda m, k: keys.index(m[k])  # noqa: E731
        if lhs.startswith("e^{"):
            self.softmax.append(("exp", number(lhs[3:-1]), number(chain[-1][1]), chain[-1][0]))
        elif re.fullmatch(r"\\text\{[^{}]*\}", lhs):
            self.softmax.append(("sum", number(chain[-1][1]), chain[-1][0]))
        elif m := re.fullmatch(rf"Q_\{{{_LABEL}\}}\\cdot K_\{{{_LABEL}\}}", lhs):
            i, j = label(m, 1), key(m, 2)
            self.products("S", (i, j), chain, list(zip(self.get("Q")[i], self.keys_matrix()[j])))
        elif m := re.fullmatch(rf"(Q|K|V)_\{{{_LABEL},(\d+)\}}", lhs):
            i, c = (label if m[1] == "Q" else key)(m, 2), int(m[3]) - 1
            X = self.get("X" if m[1] == "Q" or (0, "X_kv") not in self.shown else "X_kv")
            W, b = self.get("W_" + m[1]), self.shown.get((0, "b_" + m[1]))
            self.products(m[1], (i, c), chain, list(zip(X[i], [w[c] for w in W])), b[0][c] if b else None)
        elif m := re.fullmatch(rf"\\text\{{[^{{}}]*\}}_\{{{_LABEL},(\d+)\}}", lhs):
            i, c = label(m, 1), int(m[2]) - 1
            if self.output_projection:
                C, W, b = self.get("C"), self.get("W_O"), self.shown.get((0, "b_O"))
                self.products("OUT", (i, c), chain, list(zip(C[i], [w[c] for w in W])), b[0][c] if b else None)
            else:
                A, V = self.get("A"), self.get("V")
                self.products("O", (i, c), chain, list(zip(A[i], [v[c] for v in V])))
        elif m := re.fullmatch(rf"\\text\{{[^{{}}]*\}}_\{{{_LABEL}\}}", lhs):
            self.weighted(label(m, 1), chain)
        elif m := re.fullmatch(rf"dV_\{{{_LABEL},(\d+)\}}", lhs):
            j, c = key(m, 1), int(m[2]) - 1
            A, dO = self.get("A"), self.get("dO")
            self.products("dV", (j, c), chain, [(A[i][j], dO[i][c]) for i in range(len(A))])
        elif m := re.fullmatch(rf"dA_\{{{_LABEL},{_LABEL}\}}", lhs):
            i, j = label(m, 1), key(m, 2)
            self.products("dA", (i, j), chain, list(zip(self.get("dO")[i], self.get("V")[j])))
        elif (m := re.fullmatch(rf"dZ_\{{{_LABEL},{_LABEL}\}}", lhs)) and "\\times\\left(" in chain[0][1]:
            self.compact(label(m, 1), key(m, 2), chain)
        elif m := re.fullmatch(rf"dZ_\{{{_LABEL},{_LABEL}\}}", lhs):
            i, k = label(m, 1), key(m, 2)
            J, dA = self.get(f"J:{m[1]}"), self.get("dA")
            self.products("JdA", (i, k), chain, [(J[j][k], dA[i][j]) for j in range(len(J))])
        elif m := re.fullmatch(rf"r_\{{{_LABEL}\}} = \\sum_k dA_k\\,\\alpha_k", lhs):
            i = label(m, 1)
            self.products("r", (i,), chain, list(zip(self.get("dA")[i], self.get("A")[i])))
            self.r = number(chain[-1][1])
        elif m := re.fullmatch(rf"dQ_\{{{_LABEL},(\d+)\}}", lhs):
            i, t = label(m, 1), int(m[2]) - 1
            dS, K = self.get("dS"), self.keys_matrix()
            self.products("dQ", (i, t), chain, [(dS[i][j], K[j][t]) for j in range(len(K))])
        elif m := re.fullmatch(rf"dK_\{{{_LABEL},(\d+)\}}", lhs):
            j, t = key(m, 1), int(m[2]) - 1
            dS, Q = self.get("dS"), self.get("Q")
            self.products("dK", (j, t), chain, [(dS[i][j], Q[i][t]) for i in range(len(Q))])
        else:
            raise AssertionError(f"a line the reader does not know: {row}")

    def weighted(self, i: int, chain) -> None:
        """out_i ≈ Σ w_j·V_j ≈ Σ [products] ≈ [output]: each product, and each column's sum."""
        (_, first), (rel_p, middle), (rel_o, last) = chain
        terms = [re.fullmatch(rf"({NUM}|\\left\({NUM}\\right\))\\cdot(\[.*\])", t) for t in split_sum(first)]
        assert all(terms), first
        alpha, V = self.alpha[(self.head, i)], self.get("V")
        prods = [vector(p) for p in split_sum(middle)]
        for j, (t, p) in enumerate(zip(terms, prods)):
            w, v = operand(t[1]), vector(t[2])
            for c, (x, y) in enumerate(zip(v, p)):
                self.line(
                    "prod", (i, j, c), ([(w, x)], None), "products", y, rel_p + "v", ([(alpha[j], V[j][c])], None)
                )
        for c, out in enumerate(vector(last)):  # "≈v": the relation of a whole vector, some entries may be exact
            self.line("O", (i, c), [p[c] for p in prods], "sum", out, rel_o + "v")

    def compact(self, i: int, k: int, chain) -> None:
        """dZ_ik = α_k × (dA_k − r)."""
        m = re.fullmatch(
            rf"({NUM}|\\left\({NUM}\\right\))\\times\\left\( ({NUM}) - ({NUM}|\\left\({NUM}\\right\))\\right\)",
            chain[0][1],
        )
        assert m, chain
        self.line("dZ", (i, k), (operand(m[1]), number(m[2]), operand(m[3])), "compact", number(chain[-1][1]),
                  chain[-1][0], (self.get("A")[i][k], self.get("dA")[i][k], self.r))  # fmt: skip
