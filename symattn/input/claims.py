"""Read a claims file: the inputs (inline or ``spec = "path"``) and the numbers someone computed.

Claimed numbers keep their digits as written (``0.650`` claims three decimals,
``0.65`` two) and are read from their text, never through floats.

    spec = "seed.toml"
    [claims]
    scaled = [[0.707, 0.071, 0.566], ...]      # a whole matrix
    "weights[2][3]" = 0.33                       # one entry (1-based)
    "weights[2][1]" = ""                         # blank: not answered (listed in Claims.blanks, not checked)
    [claims.rows."它"]                           # one row: a token label or a 1-based index
    exp = [1.916, 1.143, 1.699]
    exp_sum = 4.758

With several heads (or W_O) a head's own quantities take a prefix: ``"h1.weights[1][2]" = "0.40"``,
``h2.output = [[...]]``, ``[claims.h1.rows."它"]``; which quantities are a head's and which the
layer's: :mod:`symattn.input.quantities`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from symattn import variants
from symattn.input import quantities
from symattn.input.errors import SpecError
from symattn.input.files import kind_of, named_spec, read_table
from symattn.input.limits import CLAIMS, NUMBER_LENGTH
from symattn.input.messages import said
from symattn.input.numeral import Numeral, NumeralError, has_foreign_digits, parse_claimed
from symattn.input.parts import read_decimals
from symattn.input.quantities import (
    GRADIENTS,
    INPUTS,
    NOT_IN_ROWS,
    OUTPUT_PROJECTION,
    PROJECTED_GRADIENTS,
    QUANTITIES,
    SHARED,
    SHARED_PARTS,
    is_multihead,
    is_per_head,
)
from symattn.input.reader import Reader, check_keys
from symattn.input.records import record
from symattn.input.spec import SPEC_KEYS, Spec, spec_from_mapping

_KEY = re.compile(r"([A-Za-z_]+)((?:\[[0-9]+\])*)")  # ASCII digits: never '²'
_INDEX = re.compile(r"\[([0-9]+)\]")
_HEAD = re.compile(r"h([0-9]{1,9})")  # a table of one head's claims: [claims.h2]
_COMMA = re.compile(r"[-+−]?[0-9]+,[0-9]+\s*%?")  # "0,311", "40,3%": a decimal comma (bounded text only)
_PREFIXED = re.compile(r"h([0-9]{1,9})\.(.+)", re.DOTALL)  # "h2.weights[1][2]"
# the terms of one dot product: "products.scores[1][2]" = ["0.9", "0.02"]; products.output[i][c] the same
_PRODUCTS = re.compile(r"products\.(scores|output)((?:\[[0-9]+\])*)")
PRODUCTS = {"products.scores": "scores", "products.output": "output"}  # each term claim and the sum it adds up to


@record
class Claim:
    """One claimed number and where it stands."""

    quantity: str
    row: int | None  # 0-based query row
    col: int | None  # 0-based key (or output column)
    number: Numeral
    in_row_section: bool  # written under [claims.rows.<token>]
    key: str  # as in the file, for messages
    head: int | None = None  # 0-based head of a per-head claim (several heads or W_O); None: the layer's
    term: int | None = None  # 0-based term t of a partial product (products.scores[i][j], t); None: a value
    prefix: int | None = None  # hN.Q, hN.K, hN.V: the layer's matrix, in head N's columns (0-based N), as written


class Written(NamedTuple):
    """An answer as written, where it stands: a decimal comma, or (grading) text counted blank."""

    key: str  # as in the file, with its 1-based position: claims.scores[3][1]
    text: str
    quantity: str
    row: int | None  # 0-based
    col: int | None
    head: int | None = None


@record
class Claims:
    spec: Spec
    claims: tuple[Claim, ...]
    source: str
    blanks: tuple[str, ...] = ()  # keys left as "" (an answers sheet not yet filled in), 1-based, in file order
    student: str | None = None  # ``student = "id"``: whose answers these are (symattn exercise writes it)
    # what the file's own ``decimals`` table asks for, (Decimals field, n); defaults and a spec file's ask nothing
    asked: tuple[tuple[str, int], ...] = ()
    # claims written with a decimal comma ("0,311", read as 0.311), in file order
    commas: tuple[Written, ...] = ()
    # where grading asks so, answers read as blanks: in other digits than 0-9 ("٣.٥"), and other text that
    # is not a number ("abc", "0.5.1")
    foreign: tuple[Written, ...] = ()
    unreadable: tuple[Written, ...] = ()


class _ClaimReader(Reader):
    def __init__(self, source: str, spec: Spec, text_blank: bool = False):
        super().__init__(source)
        self.spec = spec
        self.out: list[Claim] = []
        self.blanks: list[str] = []
        self.commas: list[Written] = []
        self.text_blank = text_blank
        self.foreign: list[Written] = []
        self.unreadable: list[Written] = []
        self.seen: dict[tuple, tuple[str, str]] = {}  # each entry claimed: its name as written, the key that claimed it
        self.under = ""  # the head prefix the key being read is written under ("h2."), or none

    def is_blank(self, raw: object, key: str, position: tuple[int, ...], where: _Where, index: tuple[int, ...]) -> bool:
        """An empty string is a blank left to fill in: recorded, never checked. With ``text_blank``
        (grading a class), so is text that is not a number, recorded to be named."""
        if isinstance(raw, str) and not raw.strip():
            self.blanks.append(key + "".join(f"[{p}]" for p in position))
            return True
        if not self.text_blank or not isinstance(raw, str) or _is_number(where.quantity, raw):
            return False
        found = self.written(key, position, raw, where, index)
        (self.foreign if has_foreign_digits(raw) else self.unreadable).append(found)
        return True

    def written(self, key: str, position: tuple[int, ...], raw: str, where: _Where, index: tuple[int, ...]) -> Written:
        row, col = where.at(index)
        return Written(key + "".join(f"[{p}]" for p in position), raw.strip(), where.quantity, row, col, where.head)

    def number_of(
        self, raw: object, key: str, position: tuple[int, ...], where: _Where, index: tuple[int, ...]
    ) -> Numeral:
        quantity = where.quantity
        angle = variants.claimed_angle(quantity, raw)  # "pi/2", "90deg": an angle as the document writes it
        if angle is not None:
            return angle
        if isinstance(raw, str) and len(raw) <= 2 * NUMBER_LENGTH and _COMMA.fullmatch(raw.strip()):
            # a decimal comma is read as a point, as grade reads it; the report notes it once
            self.commas.append(self.written(key, position, raw, where, index))
            raw = raw.replace(",", ".")
        if quantity == "percent" and not (isinstance(raw, str) and raw.strip().endswith("%")):
            # a bare number under "percent" is a percentage: 40.3 means 40.3%
            number = self.number(raw, key, position)
            if number.form != "decimal":
                raise self.error(key, f"expected a percentage such as 40.3%, got {number.text!r}", position)
            raw = number.text + "%"
        try:
            return parse_claimed(raw)
        except NumeralError as exc:
            raise self.error(key, str(exc), position) from None

    def add(self, claim: Claim, position: tuple[int, ...]) -> None:
        """One claim more. An entry claimed again under another name (h2.latent and latent are one shared
        matrix, h2.Q[1][1] is Q[1][3]) is refused in one line naming both keys: two verdicts in two rows that
        read alike. Under one name it may be claimed twice: a table's weights and a row's, at other digits."""
        key = claim.key
        if len(self.out) >= CLAIMS:
            raise self.limit(key, f"more than {CLAIMS} claims (the limit)")
        name = self.under + claim.quantity
        place = (claim.quantity, claim.head, claim.row, claim.col, claim.term)
        first = self.seen.setdefault(place, (name, key + "".join(f"[{p}]" for p in position)))
        if first[0] != name:
            raise self.error(key, said("claimed_twice", first=first[1]), position)
        self.out.append(claim)

    def section(self, table: Mapping[str, Any], prefix: str, row: int | None, head: int | None = None) -> None:
        outer = self.under
        for raw_key, value in table.items():
            self.under = outer  # the prefix of the table this one lies in; a key's own is set by head_of
            key, text = f"{prefix}.{raw_key}", str(raw_key)
            if row is None and text == "rows":
                self.rows(value, key, head)
                continue
            if text == "products" or text.startswith("products.") or ".products." in text:
                self.products(text, value, key, row, head)
                continue
            whole, prefixed = _HEAD.fullmatch(text), _PREFIXED.fullmatch(text)
            if whole and head is None and isinstance(value, Mapping):  # [claims.h2]: one head's claims
                self.section(value, key, row, self.head_of(whole.group(1), key))
            elif prefixed and head is None:  # "h2.weights[1][2]"
                self.claim(prefixed.group(2), value, key, row, self.head_of(prefixed.group(1), key))
            else:
                self.claim(text, value, key, row, head)
        self.under = outer

    def products(self, text: str, value: Any, key: str, row: int | None, head: int | None) -> None:
        """Partial products: ``products.scores[i][j]`` (a dotted TOML key, or one quoted key), a list of terms."""
        prefixed = _PREFIXED.fullmatch(text)
        if prefixed and head is None:  # "h2.products.scores[1][2]"
            head, text = self.head_of(prefixed.group(1), key), prefixed.group(2)
        if row is not None:
            raise self.error(key, "partial products are claimed by entry (products.scores[i][j]), not in a row section")
        if text == "products" and isinstance(value, Mapping):  # products."scores[1][2]" = [...]
            for inner, terms in value.items():
                self.products(f"products.{inner}", terms, f"{key}.{inner}", None, head)
            return
        match = _PRODUCTS.fullmatch(text)
        if match is None:
            raise self.error(key, "unknown partial products; expected products.scores[i][j] or products.output[i][c]")
        name = "products." + match.group(1)
        if is_multihead(self.spec) and head is None:
            more = f" to h{self.spec.heads}.{name}" if self.spec.heads > 1 else ""
            raise self.error(key, f"{name} is claimed per head: h1.{name}{more}")
        spec = self.spec
        d_k, d_v = len(spec.Q[0]) // spec.heads, len(spec.V[0]) // spec.kv_groups  # one head's columns
        size = (len(spec.Q), len(spec.K), d_k) if name == "products.scores" else (len(spec.Q), d_v, len(spec.K))
        what = "q_i,t·k_j,t for t = 1.." if name == "products.scores" else "p_ij·v_jc for j = 1.."
        found = _INDEX.findall(match.group(2))
        if any(len(i) > 9 for i in found):
            raise self.error(key, "an index has more than 9 digits")
        if len(found) > 2:
            raise self.error(key, f"{name} takes 2 index(es), got {len(found)}")
        indices = tuple(int(i) for i in found)
        for index, top in zip(indices, size):
            if not 1 <= index <= top:
                raise self.error(key, f"index {index} is out of range 1..{top}")
        self.terms(_Where(name, None, head, 0), value, (indices, ()), size, key, what)

    def terms(self, where: _Where, value: Any, at: tuple[tuple[int, ...], ...], size: tuple[int, ...], key: str, what):
        """The lists of terms under one key: a matrix of lists, a row of them, or one list (its own entry).
        ``at``: the indexes the key names, and those of the entries below it (the position in messages)."""
        named, below = at
        indices = named + below
        if len(indices) < 2:
            items = self.listed(value, key, size[len(indices)], where.quantity, matrix=True, position=below)
            for k, item in enumerate(items):
                self.terms(where, item, (named, below + (k + 1,)), size, key, what)
            return
        if not isinstance(value, (list, tuple)):
            raise self.error(key, f"expected a list of terms, got {kind_of(value)}", below)
        if len(value) != size[2]:
            raise self.error(key, f"expected {size[2]} terms ({what}{size[2]}), got {len(value)}", below)
        i, j = indices[0] - 1, indices[1] - 1
        for t, raw in enumerate(value):
            position = below + (t + 1,)
            if self.is_blank(raw, key, position, where, (i, j)):
                continue
            number = self.number_of(raw, key, position, where, (i, j))
            self.add(Claim(where.quantity, i, j, number, False, key, where.head, t), position)

    def head_of(self, digits: str, key: str) -> int | None:
        """The 0-based head of a prefix hN; None for the one head of a spec without W_O (h1 is all there is)."""
        n, heads = int(digits), self.spec.heads
        if not 1 <= n <= heads:
            raise self.error(key, f"head {n} is out of range 1..{heads}")
        self.under = f"h{n}."  # the name the claims below are written under (section resets it)
        return n - 1 if is_multihead(self.spec) else None

    def claim(self, text: str, value: Any, key: str, row: int | None, head: int | None) -> None:
        match = _KEY.fullmatch(text)
        name = match.group(1) if match else text
        spec, prefixed = self.spec, head is not None
        self.refuse(name, key, row, prefixed)
        per_head = is_per_head(name, spec, prefixed)
        shape = quantities.shape(name, spec, per_head or (prefixed and name in INPUTS))
        offset = 0  # a head's slice of Q, K or V is a claim on the whole projection's columns
        if prefixed and name in INPUTS:
            assert head is not None  # prefixed
            offset = head * shape[1]
        if row is not None:
            shape = shape[1:]
        found = _INDEX.findall(match.group(2)) if match else []
        if any(len(i) > 9 for i in found):
            raise self.error(key, "an index has more than 9 digits")
        indices = tuple(int(i) for i in found)
        if len(indices) > len(shape):
            raise self.error(key, f"{name} takes {len(shape)} index(es), got {len(indices)}")
        for index, size in zip(indices, shape):
            if not 1 <= index <= size:
                raise self.error(key, f"index {index} is out of range 1..{size}")
        inner = shape[1] if len(shape) == 3 else 0
        where = _Where(name, row, head if per_head else None, offset, inner, head if name in INPUTS else None)
        self.values(where, value, shape[len(indices) :], indices, key)

    def refuse(self, name: str, key: str, row: int | None, prefixed: bool) -> None:
        """One line naming the claim for a quantity that this spec, place or prefix does not have."""
        spec, p = self.spec, self.spec.projection
        if name in INPUTS and row is None and p is None and not variants.makes_inputs(spec):
            raise self.error(key, f"{name} is an input here; claims on Q, K and V need X with W_Q, W_K, W_V")
        if name in PROJECTED_GRADIENTS and p is None:
            raise self.error(key, f"claims on {name} need X with W_Q, W_K, W_V")
        if name in ("dX",) and p is not None and p.X_kv is not None:
            raise self.error(key, "claims on dX are for self-attention (with X_kv, dX has two parts)")
        if name in OUTPUT_PROJECTION and not is_multihead(spec):
            raise self.error(key, f"{name} is a quantity of several heads or W_O; this spec has one head")
        if name in ("dW_O",) and spec.W_O is None:
            raise self.error(key, "claims on dW_O need W_O")
        needs = variants.missing(spec, name)  # a part's own quantity, and the spec has not the part
        if needs is not None:
            raise self.error(key, f"claims on {name} need {needs}")
        if row is not None and name in NOT_IN_ROWS and name not in SHARED + INPUTS:
            raise self.error(
                key,
                f"{name} is claimed as a whole matrix or by entry ({name}[i][j]), not in a "
                "row section (its rows are keys or input dimensions)",
            )
        if name not in QUANTITIES or (row is not None and name in SHARED + INPUTS):
            raise self.error(key, "unknown quantity; expected one of " + ", ".join(self.allowed(row, prefixed)))
        if not is_multihead(spec) or name in INPUTS + SHARED + SHARED_PARTS:
            return
        heads = spec.heads
        if prefixed and name in OUTPUT_PROJECTION + PROJECTED_GRADIENTS:
            raise self.error(key, f"{name} is not per head: claim it without the prefix")
        if not prefixed and is_per_head(name, spec, False):
            more = f" to h{heads}.{name}" if heads > 1 else ""
            raise self.error(key, f"{name} is claimed per head: h1.{name}{more}")

    def allowed(self, row: int | None, prefixed: bool) -> list[str]:
        spec = self.spec
        out = []
        for q in QUANTITIES:
            if row is not None and q in SHARED + INPUTS:
                continue
            if row is not None and q in NOT_IN_ROWS:
                continue
            if q in INPUTS + PROJECTED_GRADIENTS and spec.projection is None:
                if q in PROJECTED_GRADIENTS or not variants.makes_inputs(spec):
                    continue
            if q in GRADIENTS and spec.backward is None:
                continue
            if q in OUTPUT_PROJECTION and (not is_multihead(spec) or prefixed):
                continue
            if q == "dW_O" and spec.W_O is None:
                continue
            if variants.missing(spec, q) is not None:  # a part's own, and the spec has not the part
                continue
            if is_multihead(spec) and q not in INPUTS + SHARED:
                if prefixed and q in PROJECTED_GRADIENTS:
                    continue
                if not prefixed and is_per_head(q, spec, False):
                    continue
            out.append(q)
        return out + ([] if row is not None else ["rows"])

    def values(self, where: _Where, value: Any, shape: tuple[int, ...], indices: tuple[int, ...], key: str) -> None:
        name = where.quantity
        fixed = tuple(i - 1 for i in indices)
        if not shape:
            self.one(where, fixed, value, key, ())
            return
        if where.inner or len(shape) == 3:  # [block][row][col]: every level by its own index
            items = self.listed(value, key, shape[0], name, matrix=len(shape) > 1)
            for j, item in enumerate(items):
                self.values(where, item, shape[1:], indices + (j + 1,), key)
            return
        if len(shape) == 1:
            items = self.listed(value, key, shape[0], name)
            for j, item in enumerate(items):
                self.one(where, fixed + (j,), item, key, (j + 1,))
            return
        rows = self.listed(value, key, shape[0], name, matrix=True)
        for i, line in enumerate(rows):
            items = self.listed(line, key, shape[1], name, position=(i + 1,))
            for j, item in enumerate(items):
                self.one(where, (i, j), item, key, (i + 1, j + 1))

    def one(self, where: _Where, index: tuple[int, ...], raw: object, key: str, position: tuple[int, ...]) -> None:
        """One entry: a blank, or a claim at its place."""
        if not self.is_blank(raw, key, position, where, index):
            number = self.number_of(raw, key, position, where, index)
            row, col = where.at(index)
            claim = Claim(where.quantity, row, col, number, where.row is not None, key, where.head, prefix=where.prefix)
            self.add(claim, position)

    def listed(
        self, value: Any, key: str, size: int, name: str, *, matrix: bool = False, position: tuple[int, ...] = ()
    ) -> list:
        if not isinstance(value, (list, tuple)):
            what = "a matrix (a list of rows)" if matrix else "a list"
            raise self.error(key, f"expected {what}, got {kind_of(value)}", position)
        if len(value) != size:
            unit = "rows" if matrix else "entries"
            raise self.error(key, f"shape mismatch: {name} has {size} {unit} here, got {len(value)}", position)
        return list(value)

    def rows(self, table: Any, key: str, head: int | None) -> None:
        if not isinstance(table, Mapping):
            raise self.error(key, f"expected a table of rows, got {kind_of(table)}")
        for label, claims in table.items():
            row = self.focus(label, self.spec.tokens, f"{key}.{label}")
            if not isinstance(claims, Mapping):
                raise self.error(f"{key}.{label}", f"expected a table of claims, got {kind_of(claims)}")
            self.section(claims, f"{key}.{label}", row, head)


@record
class _Where:
    """Where the numbers of one key go: the quantity, the row of a row section, the head, a column offset."""

    quantity: str
    row: int | None
    head: int | None
    offset: int
    inner: int = 0  # the rows of each block of a [block][row][col] quantity (0: it has two indices)
    prefix: int | None = None  # the head of hN.Q, hN.K, hN.V (the offset is its first column)

    def at(self, index: tuple[int, ...]) -> tuple[int | None, int | None]:
        """The 0-based (row, column) of an entry, from its index under this key ([b][i][c]: row b·n + i)."""
        if self.inner and len(index) == 3:
            return index[0] * self.inner + index[1], index[2]
        if self.row is not None:
            index = (self.row,) + index
        row, col = index + (None,) * (2 - len(index))
        return row, (None if col is None else col + self.offset)


def _is_number(quantity: str, raw: str) -> bool:
    """Whether an answer's text reads as a number (a decimal comma too; under percent a bare number)."""
    text = raw.strip()
    if variants.claimed_angle(quantity, text) is not None:
        return True
    if len(text) <= 2 * NUMBER_LENGTH and _COMMA.fullmatch(text):
        text = text.replace(",", ".")
    try:
        parse_claimed(text + "%" if quantity == "percent" and not text.endswith("%") else text)
    except NumeralError:
        return False
    return True


def claims_from_mapping(
    data: Mapping[str, Any],
    source: str = "<dict>",
    base: Path | None = None,
    spec: Spec | None = None,
    text_blank: bool = False,
) -> Claims:
    """Validate a claims mapping. ``spec`` (a Spec) replaces the file's own inputs; ``text_blank``
    reads an answer that is text but not a number as a blank, listed in ``Claims.foreign`` (other digits
    than 0-9) or ``Claims.unreadable`` (grade: one such answer must not leave the rest ungraded, and an
    LMS's report counts it blank the same way)."""
    reader = Reader(source)
    if not isinstance(data, Mapping):
        raise reader.error(None, f"expected a table, got {kind_of(data)}")
    student = data.get("student")  # accepted, though not listed among the keys a claims file takes
    check_keys(reader, {k: v for k, v in data.items() if k != "student"}, SPEC_KEYS + ("spec", "claims"))
    if student is not None and not (isinstance(student, str) and student.strip()):
        raise reader.error("student", f"expected a student id as a non-empty string, got {kind_of(student)}")
    inline = {k: v for k, v in data.items() if k not in ("spec", "claims", "student")}
    # the file's own decimals ask for them; next to spec = "path" they are the only key allowed
    asked = _asked(reader, inline.get("decimals"))
    if spec is None:
        if "spec" in data:
            inputs = [k for k in inline if k != "decimals"]
            if inputs:
                raise reader.error(inputs[0], 'give the inputs inline or as spec = "path", not both')
            path = data["spec"]
            if not isinstance(path, str):
                raise reader.error("spec", f"expected a path, got {kind_of(path)}")
            real, problem = named_spec(path, source, base or Path("."))  # named from the claims file's key
            if real is None:
                raise reader.error("spec", problem)
            full = (base or Path(".")) / path
            spec = spec_from_mapping(read_table(real), str(full), full.parent)
        else:
            spec = spec_from_mapping(inline, source)
    if "claims" not in data:
        raise reader.error("claims", "missing")
    table = data["claims"]
    if not isinstance(table, Mapping):
        raise reader.error("claims", f"expected a table of claims, got {kind_of(table)}")
    claim_reader = _ClaimReader(source, spec, text_blank)
    claim_reader.section(table, "claims", None)
    return Claims(
        spec,
        tuple(claim_reader.out),
        source,
        tuple(claim_reader.blanks),
        student,
        asked,
        tuple(claim_reader.commas),
        tuple(claim_reader.foreign),
        tuple(claim_reader.unreadable),
    )


def _asked(reader: Reader, raw: object) -> tuple[tuple[str, int], ...]:
    """The decimals a ``decimals`` table asks for: only the keys written (a default asks nothing)."""
    if raw is None:
        return ()
    given = read_decimals(reader, raw, "decimals")
    assert isinstance(raw, Mapping)  # read_decimals refuses anything else
    return tuple((name, getattr(given, name)) for name in raw)


def load_claims(claims: str | Path | Mapping[str, Any] | Claims, spec: Spec | None = None) -> Claims:
    """Load a claims file (TOML or JSON), a mapping, or pass Claims through."""
    if isinstance(claims, Claims):
        return claims
    if isinstance(claims, Mapping):
        return claims_from_mapping(claims, spec=spec)
    path = Path(claims)
    return claims_from_mapping(read_table(path), str(claims), path.parent, spec)


__all__ = ["Claim", "Claims", "GRADIENTS", "QUANTITIES", "SpecError", "Written", "load_claims"]
