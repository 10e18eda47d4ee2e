"""Read and validate a spec: the inputs of one attention derivation.

A spec comes from a TOML file, a JSON file or a Python mapping. Numbers are
read from their text (see :mod:`symattn.numeral`); every problem raises a
:class:`~symattn.errors.SpecError` naming the source, the key and the position.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from .errors import ShapeError, SpecError
from .numeral import Numeral, NumeralError, parse_numeral

MAX_TOKENS = 128
MAX_DIM = 256
MAX_DECIMALS = 50
MAX_LABEL = 40
MAX_TITLE = 200

SCALES = ("sqrt", "none")
ROUNDINGS = ("exact", "hand")
EXPANDS = ("focus", "all")

Matrix = tuple[tuple[Numeral, ...], ...]


@dataclass(frozen=True)
class Decimals:
    """Digits after the point shown for each quantity."""

    scores: int = 3  # used only where a score does not terminate
    sqrt_dk: int = 3
    scaled: int = 3
    exp: int = 3  # also the row sums of exps
    weights: int = 3
    percent: int = 1
    output: int = 3


@dataclass(frozen=True)
class Spec:
    """Validated inputs and settings. Build it with :func:`load_spec`."""

    Q: Matrix
    K: Matrix
    V: Matrix
    tokens: tuple[str, ...]
    focus: int  # 0-based row of Q
    title: str | None = None
    lang: str = "en"
    scale: str | Numeral = "sqrt"
    rounding: str = "exact"
    expand: str = "focus"
    decimals: Decimals = field(default_factory=Decimals)
    source: str = "<dict>"

    @property
    def d_k(self) -> int:
        return len(self.Q[0])

    def with_options(self, **options: Any) -> "Spec":
        """Override settings (as the CLI flags do), validated like the spec keys."""
        raw = {k: v for k, v in options.items() if v is not None}
        unknown = sorted(set(raw) - _OVERRIDABLE)
        if unknown:
            raise TypeError(f"Unknown setting {unknown[0]!r}.")
        reader = _Reader(self.source)
        changes: dict[str, Any] = {}
        if "lang" in raw:
            changes["lang"] = reader.lang(raw["lang"], "--lang")
        if "rounding" in raw:
            changes["rounding"] = reader.choice(raw["rounding"], "--rounding", ROUNDINGS)
        if "expand" in raw:
            changes["expand"] = reader.choice(raw["expand"], "--expand", EXPANDS)
        if "focus" in raw:
            changes["focus"] = reader.focus(raw["focus"], self.tokens, "--focus")
        return replace(self, **changes)


_OVERRIDABLE = {"lang", "rounding", "expand", "focus"}
_KEYS = ("title", "lang", "tokens", "focus", "Q", "K", "V", "scale", "rounding", "expand", "decimals")


def _kind(value: object) -> str:
    names = {str: "a string", bool: "a boolean", int: "a number", dict: "a table", list: "a list"}
    return names.get(type(value), type(value).__name__)


class _Reader:
    """Validation helpers that know the source name for error messages."""

    def __init__(self, source: str):
        self.source = source

    def error(self, key: str | None, problem: str, position: tuple[int, ...] = ()) -> SpecError:
        return SpecError(self.source, key, problem, position)

    def matrix(self, raw: object, key: str, *, max_rows: int = MAX_TOKENS) -> Matrix:
        if not isinstance(raw, (list, tuple)):
            raise self.error(key, f"expected a matrix (a list of rows), got {_kind(raw)}")
        if not raw:
            raise self.error(key, "empty matrix")
        if len(raw) > max_rows:
            raise self.error(key, f"{len(raw)} rows; at most {max_rows} are supported")
        rows = []
        for i, row in enumerate(raw, 1):
            if not isinstance(row, (list, tuple)):
                raise self.error(key, f"expected a row (a list of numbers), got {_kind(row)}", (i,))
            if not row:
                raise self.error(key, "empty row", (i,))
            if len(row) > MAX_DIM:
                raise self.error(key, f"{len(row)} columns; at most {MAX_DIM} are supported", (i,))
            if rows and len(row) != len(rows[0]):
                raise self.error(key, f"row has {len(row)} entries but row 1 has {len(rows[0])}", (i,))
            rows.append(tuple(self.number(x, key, (i, j)) for j, x in enumerate(row, 1)))
        return tuple(rows)

    def number(self, raw: object, key: str, position: tuple[int, ...] = (), **kw: Any) -> Numeral:
        try:
            return parse_numeral(raw, **kw)
        except NumeralError as exc:
            raise self.error(key, str(exc), position) from None

    def text(self, raw: object, key: str, limit: int, position: tuple[int, ...] = ()) -> str:
        if not isinstance(raw, str):
            raise self.error(key, f"expected a string, got {_kind(raw)}", position)
        if not raw.strip():
            raise self.error(key, "empty text", position)
        if len(raw) > limit:
            raise self.error(key, f"longer than {limit} characters", position)
        if any(ch < " " or ch == "\x7f" for ch in raw):
            raise self.error(key, "control characters (such as newlines) are not allowed", position)
        return raw

    def labels(self, raw: object, key: str, count: int, rows_of: str) -> tuple[str, ...]:
        if raw is None:
            return tuple(f"t{i}" for i in range(1, count + 1))
        if not isinstance(raw, (list, tuple)):
            raise self.error(key, f"expected a list of labels, got {_kind(raw)}")
        if len(raw) != count:
            raise self.error(key, f"{len(raw)} labels for {count} rows of {rows_of}")
        seen: dict[str, int] = {}
        for i, label in enumerate(raw, 1):
            self.text(label, key, MAX_LABEL, (i,))
            if label in seen:
                raise self.error(key, f"duplicate label {label!r} (also {key}[{seen[label]}])", (i,))
            seen[label] = i
        return tuple(raw)

    def choice(self, raw: object, key: str, options: tuple[str, ...]) -> str:
        if raw not in options:
            listed = ", ".join(repr(o) for o in options)
            raise self.error(key, f"expected one of {listed}, got {raw!r}")
        return raw  # type: ignore[return-value]

    def lang(self, raw: object, key: str) -> str:
        if not (isinstance(raw, str) and raw.isascii() and raw.isidentifier() and len(raw) <= 16):
            raise self.error(key, f"expected a language code such as 'en' or 'zh', got {raw!r}")
        return raw

    def focus(self, raw: object, tokens: tuple[str, ...], key: str) -> int:
        if isinstance(raw, str) and raw in tokens:
            return tokens.index(raw)
        index = raw
        if isinstance(raw, str) and raw.strip().isdigit():
            index = int(raw)
        if isinstance(index, int) and not isinstance(index, bool):
            if 1 <= index <= len(tokens):
                return index - 1
            raise self.error(key, f"{index} is out of range 1..{len(tokens)}")
        known = ", ".join(tokens)
        raise self.error(key, f"no token labelled {raw!r}; tokens are {known}")

    def scale(self, raw: object, key: str) -> str | Numeral:
        if raw in SCALES:
            return raw  # type: ignore[return-value]
        if isinstance(raw, str) and raw.strip() in SCALES:
            return raw.strip()
        try:
            number = parse_numeral(raw)
        except NumeralError:
            raise self.error(key, f"expected 'sqrt', 'none' or an exact number such as '1/2', got {raw!r}") from None
        if number.value <= 0:
            raise self.error(key, f"must be positive, got {number.text!r}")
        return number

    def decimals(self, raw: object, key: str) -> Decimals:
        if not isinstance(raw, Mapping):
            raise self.error(key, f"expected a table of integers, got {_kind(raw)}")
        names = [f.name for f in fields(Decimals)]
        values = {}
        for name, value in raw.items():
            if name not in names:
                raise self.error(f"{key}.{name}", "unknown key; expected one of " + ", ".join(names))
            if isinstance(value, str) and value.isdigit():
                value = int(value)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_DECIMALS:
                raise self.error(f"{key}.{name}", f"expected an integer from 0 to {MAX_DECIMALS}, got {value!r}")
            values[name] = value
        return Decimals(**values)


def check_keys(reader: _Reader, data: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    for key in data:
        if key not in allowed:
            raise reader.error(str(key), "unknown key; expected one of " + ", ".join(sorted(allowed)))


def _shape(m: Matrix) -> str:
    return f"{len(m)}×{len(m[0])}"


def spec_from_mapping(data: Mapping[str, Any], source: str = "<dict>") -> Spec:
    """Validate a mapping of spec keys (as read from TOML/JSON, or written in Python)."""
    reader = _Reader(source)
    if not isinstance(data, Mapping):
        raise reader.error(None, f"expected a table of spec keys, got {_kind(data)}")
    check_keys(reader, data, _KEYS)
    for key in ("Q", "K", "V"):
        if key not in data:
            raise reader.error(key, "missing")
    Q = reader.matrix(data["Q"], "Q")
    K = reader.matrix(data["K"], "K")
    V = reader.matrix(data["V"], "V")
    if len(Q[0]) != len(K[0]):
        raise ShapeError(source, "K", f"shape mismatch: Q is {_shape(Q)} and K is {_shape(K)}; "
                         "Q and K need the same number of columns (d_k)")
    if len(Q) != len(K):
        raise ShapeError(source, "K", f"shape mismatch: Q is {_shape(Q)} and K is {_shape(K)}; "
                         "Q and K need one row per token")
    if len(V) != len(K):
        raise ShapeError(source, "V", f"shape mismatch: K is {_shape(K)} and V is {_shape(V)}; "
                         "V needs one row per row of K")
    tokens = reader.labels(data.get("tokens"), "tokens", len(Q), "Q")
    focus = reader.focus(data["focus"], tokens, "focus") if "focus" in data else len(tokens) - 1
    title = reader.text(data["title"], "title", MAX_TITLE) if "title" in data else None
    return Spec(
        Q=Q, K=K, V=V, tokens=tokens, focus=focus, title=title,
        lang=reader.lang(data["lang"], "lang") if "lang" in data else "en",
        scale=reader.scale(data["scale"], "scale") if "scale" in data else "sqrt",
        rounding=reader.choice(data.get("rounding", "exact"), "rounding", ROUNDINGS),
        expand=reader.choice(data.get("expand", "focus"), "expand", EXPANDS),
        decimals=reader.decimals(data["decimals"], "decimals") if "decimals" in data else Decimals(),
        source=source,
    )


def _toml_float(text: str) -> str:
    return text.replace("_", "")


def read_table(path: str | Path) -> dict[str, Any]:
    """Read a TOML or JSON file with every float kept as its text."""
    path = Path(path)
    source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SpecError(source, None, f"cannot read file: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SpecError(source, None, "not UTF-8 text") from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text, parse_float=str, parse_int=str, parse_constant=_reject_constant)
        except json.JSONDecodeError as exc:
            raise SpecError(source, None, f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
        except NumeralError as exc:
            raise SpecError(source, None, str(exc)) from None
        if not isinstance(data, dict):
            raise SpecError(source, None, f"expected a JSON object, got {_kind(data)}")
        return data
    try:
        return tomllib.loads(text, parse_float=_toml_float)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(source, None, f"invalid TOML: {exc}") from None


def _reject_constant(name: str) -> None:
    raise NumeralError(f"not a finite number: {name}")


def load_spec(spec: str | Path | Mapping[str, Any] | Spec) -> Spec:
    """Load a spec from a TOML/JSON path, a mapping, or pass a Spec through."""
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, Mapping):
        return spec_from_mapping(spec)
    return spec_from_mapping(read_table(spec), str(spec))
