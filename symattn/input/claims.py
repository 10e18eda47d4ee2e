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
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from symattn.input.errors import SpecError
from symattn.input.files import kind_of, read_table
from symattn.input.limits import CLAIMS
from symattn.input.numeral import Numeral, NumeralError, parse_claimed
from symattn.input.reader import Reader, check_keys
from symattn.input.spec import SPEC_KEYS, Spec, spec_from_mapping

# In the order of the derivation; "percent" is the weights written in percent.
GRADIENTS = ("dV", "dA", "dZ", "dS", "dQ", "dK", "dW_Q", "dW_K", "dW_V", "dX")  # need [backward] or --backward
PROJECTED_GRADIENTS = ("dW_Q", "dW_K", "dW_V", "dX")  # need X with W_Q, W_K, W_V
QUANTITIES = (
    "Q",
    "K",
    "V",
    "sqrt_dk",
    "scores",
    "scaled",
    "exp",
    "exp_sum",
    "weights",
    "percent",
    "output",
) + GRADIENTS
INPUTS = ("Q", "K", "V")  # claimable when they are computed from X and W
STAGE = {q: i for i, q in enumerate(QUANTITIES)} | {"percent": QUANTITIES.index("weights")}
_KEY = re.compile(r"([A-Za-z_]+)((?:\[[0-9]+\])*)")  # ASCII digits: never '²'
_INDEX = re.compile(r"\[([0-9]+)\]")


@dataclass(frozen=True)
class Claim:
    """One claimed number and where it stands."""

    quantity: str
    row: int | None  # 0-based query row
    col: int | None  # 0-based key (or output column)
    number: Numeral
    in_row_section: bool  # written under [claims.rows.<token>]
    key: str  # as in the file, for messages


@dataclass(frozen=True)
class Claims:
    spec: Spec
    claims: tuple[Claim, ...]
    source: str
    blanks: tuple[str, ...] = ()  # keys left as "" (an answers sheet not yet filled in), 1-based, in file order
    student: str | None = None  # ``student = "id"``: whose answers these are (symattn exercise writes it)


def _shape(quantity: str, spec: Spec) -> tuple[int, ...]:
    """The shape of a quantity claimed for the whole matrix."""
    n, m = len(spec.Q), len(spec.K)
    if quantity in INPUTS:
        matrix = getattr(spec, quantity)
        return (len(matrix), len(matrix[0]))
    if quantity == "sqrt_dk":
        return ()
    if quantity == "exp_sum":
        return (n,)
    if quantity in ("output", "dQ"):
        return (n, len((spec.V if quantity == "output" else spec.Q)[0]))
    if quantity in ("dV", "dK"):
        return (m, len((spec.V if quantity == "dV" else spec.K)[0]))
    if quantity in PROJECTED_GRADIENTS:
        p = spec.projection
        assert p is not None  # claims on these are refused without a projection (see _ClaimReader)
        if quantity == "dX":
            return (len(p.X), len(p.X[0]))
        W = getattr(p, "W_" + quantity[-1])
        return (len(W), len(W[0]))
    return (n, m)


class _ClaimReader(Reader):
    def __init__(self, source: str, spec: Spec):
        super().__init__(source)
        self.spec = spec
        self.out: list[Claim] = []
        self.blanks: list[str] = []

    def is_blank(self, raw: object, key: str, position: tuple[int, ...]) -> bool:
        """An empty string is a blank left to fill in: recorded, never checked."""
        if isinstance(raw, str) and not raw.strip():
            self.blanks.append(key + "".join(f"[{p}]" for p in position))
            return True
        return False

    def number_of(self, quantity: str, raw: object, key: str, position: tuple[int, ...]) -> Numeral:
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

    def add(self, quantity: str, row: int | None, col: int | None, number: Numeral, in_row: bool, key: str):
        if len(self.out) >= CLAIMS:
            raise self.limit(key, f"more than {CLAIMS} claims (the limit)")
        self.out.append(Claim(quantity, row, col, number, in_row, key))

    def section(self, table: Mapping[str, Any], prefix: str, row: int | None) -> None:
        for raw_key, value in table.items():
            key = f"{prefix}.{raw_key}"
            if row is None and raw_key == "rows":
                self.rows(value, key)
                continue
            match = _KEY.fullmatch(str(raw_key))
            name = match.group(1) if match else str(raw_key)
            if name in INPUTS and row is None and self.spec.projection is None:
                raise self.error(key, f"{name} is an input here; claims on Q, K and V need X with W_Q, W_K, W_V")
            if name in PROJECTED_GRADIENTS and self.spec.projection is None:
                raise self.error(key, f"claims on {name} need X with W_Q, W_K, W_V")
            if name in ("dX",) and self.spec.projection is not None and self.spec.projection.X_kv is not None:
                raise self.error(key, "claims on dX are for self-attention (with X_kv, dX has two parts)")
            if row is not None and name in ("dV", "dK") + PROJECTED_GRADIENTS:
                raise self.error(
                    key,
                    f"{name} is claimed as a whole matrix or by entry ({name}[i][j]), not in a "
                    "row section (its rows are keys or input dimensions)",
                )
            if name not in QUANTITIES or (row is not None and name in ("sqrt_dk",) + INPUTS):
                allowed = [
                    q
                    for q in QUANTITIES
                    if (row is None or q not in ("sqrt_dk",) + INPUTS)
                    and (q not in INPUTS or self.spec.projection is not None)
                    and (q not in GRADIENTS or self.spec.backward is not None)
                    and (q not in PROJECTED_GRADIENTS or self.spec.projection is not None)
                ]
                allowed += [] if row is not None else ["rows"]
                raise self.error(key, "unknown quantity; expected one of " + ", ".join(allowed))
            shape = _shape(name, self.spec)
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
            self.values(name, value, shape[len(indices) :], indices, row, key)

    def values(
        self, name: str, value: Any, shape: tuple[int, ...], indices: tuple[int, ...], row: int | None, key: str
    ) -> None:
        fixed = tuple(i - 1 for i in indices)
        if not shape:
            if not self.is_blank(value, key, ()):
                self.place(name, fixed, row, self.number_of(name, value, key, ()), key)
            return
        if len(shape) == 1:
            items = self.listed(value, key, shape[0], name)
            for j, item in enumerate(items):
                if not self.is_blank(item, key, (j + 1,)):
                    self.place(name, fixed + (j,), row, self.number_of(name, item, key, (j + 1,)), key)
            return
        rows = self.listed(value, key, shape[0], name, matrix=True)
        for i, line in enumerate(rows):
            items = self.listed(line, key, shape[1], name, position=(i + 1,))
            for j, item in enumerate(items):
                if not self.is_blank(item, key, (i + 1, j + 1)):
                    self.place(name, (i, j), row, self.number_of(name, item, key, (i + 1, j + 1)), key)

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

    def place(self, name: str, index: tuple[int, ...], row: int | None, number: Numeral, key: str) -> None:
        if row is not None:
            index = (row,) + index
        padded = index + (None,) * (2 - len(index))
        self.add(name, padded[0], padded[1], number, row is not None, key)

    def rows(self, table: Any, key: str) -> None:
        if not isinstance(table, Mapping):
            raise self.error(key, f"expected a table of rows, got {kind_of(table)}")
        for label, claims in table.items():
            row = self.focus(label, self.spec.tokens, f"{key}.{label}")
            if not isinstance(claims, Mapping):
                raise self.error(f"{key}.{label}", f"expected a table of claims, got {kind_of(claims)}")
            self.section(claims, f"{key}.{label}", row)


def claims_from_mapping(
    data: Mapping[str, Any], source: str = "<dict>", base: Path | None = None, spec: Spec | None = None
) -> Claims:
    """Validate a claims mapping. ``spec`` (a Spec) replaces the file's own inputs."""
    reader = Reader(source)
    if not isinstance(data, Mapping):
        raise reader.error(None, f"expected a table, got {kind_of(data)}")
    student = data.get("student")  # accepted, though not listed among the keys a claims file takes
    check_keys(reader, {k: v for k, v in data.items() if k != "student"}, SPEC_KEYS + ("spec", "claims"))
    if student is not None and not (isinstance(student, str) and student.strip()):
        raise reader.error("student", f"expected a student id as a non-empty string, got {kind_of(student)}")
    inline = {k: v for k, v in data.items() if k not in ("spec", "claims", "student")}
    if spec is None:
        if "spec" in data:
            if inline:
                raise reader.error(next(iter(inline)), 'give the inputs inline or as spec = "path", not both')
            path = data["spec"]
            if not isinstance(path, str):
                raise reader.error("spec", f"expected a path, got {kind_of(path)}")
            full = (base or Path(".")) / path
            spec = spec_from_mapping(read_table(full), str(full))
        else:
            spec = spec_from_mapping(inline, source)
    if "claims" not in data:
        raise reader.error("claims", "missing")
    table = data["claims"]
    if not isinstance(table, Mapping):
        raise reader.error("claims", f"expected a table of claims, got {kind_of(table)}")
    claim_reader = _ClaimReader(source, spec)
    claim_reader.section(table, "claims", None)
    return Claims(spec, tuple(claim_reader.out), source, tuple(claim_reader.blanks), student)


def load_claims(claims: str | Path | Mapping[str, Any] | Claims, spec: Spec | None = None) -> Claims:
    """Load a claims file (TOML or JSON), a mapping, or pass Claims through."""
    if isinstance(claims, Claims):
        return claims
    if isinstance(claims, Mapping):
        return claims_from_mapping(claims, spec=spec)
    path = Path(claims)
    return claims_from_mapping(read_table(path), str(claims), path.parent, spec)


__all__ = ["Claim", "Claims", "GRADIENTS", "QUANTITIES", "STAGE", "SpecError", "load_claims"]
