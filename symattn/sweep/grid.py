"""A sweep's GRID.toml: the lists of its ``[grid]`` table, whose product is the cases, and how each is judged.

Everything the file says wrongly on its own is refused here, in one line naming the file, the key and the
1-based position, before any case runs: a key not known, a value of the wrong type or out of range, an
empty or repeated list entry (30 and 30.0 too), ``kv_heads`` not dividing ``heads``, a rule without its
numbers, too many cases, a case whose tensors pass the engine's limit on one (it would be refused only after
the kernel had run on it). What the engine or the kernel does with a case (a variant not yet on the float64
path, a kernel that raises) is that case's failed row, not an error of the grid.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from typing import Any

from symattn import variants
from symattn.input import limits
from symattn.input.errors import LimitError, SpecError, brief
from symattn.input.files import FloatText
from symattn.input.records import record
from symattn.kernel.tolerance import parse_tolerance

DTYPES = ("float16", "bfloat16", "float32", "float64")
KINDS = ("output", "lse", "dq", "dk", "dv", *variants.keyword_gradients())
RULES = ("allclose", "flash", "ulp")
ALIGNMENTS = ("top-left", "bottom-right")
DEVICE = re.compile(r"(?:cpu|cuda|mps|xpu|xla|hpu)(?::[0-9]{1,3})?")  # a device type torch holds tensors on
SETTINGS = ("seed", "rule", "rtol", "atol", "max_ulp", "kinds", "causal_align", "device", "grid")
# each [grid] key: its kind of value and its default (None: required, or a pair of keys instead)
SIZES = {"batch": limits.BATCH_HEADS, "heads": limits.BATCH_HEADS, "kv_heads": limits.BATCH_HEADS}
SIZES |= {"seqlen": limits.KERNEL_TOKENS, "seqlen_q": limits.KERNEL_TOKENS, "seqlen_k": limits.KERNEL_TOKENS}
SIZES |= {"head_dim": limits.DIMS, "head_dim_qk": limits.DIMS, "head_dim_v": limits.DIMS}
SWEPT = {part.grid_key: part for part in variants.SWEPT}  # each part's [grid] key, in the grid's order
VARIANTS = tuple(SWEPT)
GRID_KEYS = (*SIZES, "dtype", "causal", *VARIANTS)
PAIRS = {"seqlen": ("seqlen_q", "seqlen_k"), "head_dim": ("head_dim_qk", "head_dim_v")}


@record
class Case:
    """One point of the grid's product: ``index`` in the grid's order, ``point`` its keys and values."""

    index: int
    point: dict[str, Any]

    @property
    def key(self) -> str:
        """The point as canonical JSON: what a resumed sweep matches its finished rows by."""
        return json.dumps(self.point, sort_keys=True, separators=(",", ":"))


@record
class Grid:
    source: str
    seed: int
    rule: str
    rtol: str | None  # the decimals as written (the engine reads them exactly)
    atol: str | None
    max_ulp: str | None
    kinds: tuple[str, ...]
    causal_align: str
    device: str
    lists: dict[str, list[Any]]  # the [grid] table's lists, in a fixed order
    cases: tuple[Case, ...]

    @property
    def digest(self) -> str:
        """sha256 of everything that decides the cases and their verdicts (not the file's comments or order)."""
        settings = {k: getattr(self, k) for k in ("seed", "rule", "rtol", "atol", "max_ulp", "kinds")}
        settings |= {"causal_align": self.causal_align, "device": self.device, "grid": self.lists}
        text = json.dumps(settings, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def load_grid(path: str) -> Grid:
    """Read and check GRID.toml (or .json)."""
    from symattn.input.files import read_table

    return grid_of(read_table(path, what="a grid file"), path)


def grid_of(data: dict[str, Any], source: str) -> Grid:
    """A grid from its table (as read_table gives it: floats as their text)."""
    data = _whole_numbers(data)
    for key in data:
        if key not in SETTINGS:
            raise SpecError(source, key, f"unknown key; a grid file has {', '.join(SETTINGS)}")
    table = data.get("grid")
    if not isinstance(table, dict):
        raise SpecError(source, "grid", "missing: a [grid] table of lists (heads, seqlen, head_dim, dtype, …)")
    lists = _lists(table, source)
    rule = _choice(data, "rule", RULES, "allclose", source)
    numbers = {name: _decimal(data, name, source) for name in ("rtol", "atol", "max_ulp")}
    if rule == "ulp" and numbers["max_ulp"] is None:
        raise SpecError(source, "max_ulp", 'missing: rule = "ulp" needs the bound in ULP')
    if rule == "ulp" and (numbers["rtol"] or numbers["atol"]):
        raise SpecError(source, "rtol" if numbers["rtol"] else "atol", 'is for rule "allclose" or "flash"')
    kinds = data.get("kinds", ["output"])
    if not isinstance(kinds, list) or not kinds:
        raise SpecError(source, "kinds", f"expected a list of some of {', '.join(KINDS)}, got {brief(kinds)}")
    for i, kind in enumerate(kinds):
        if kind not in KINDS or kinds.index(kind) != i:
            why = "twice" if kind in KINDS else f"expected one of {', '.join(KINDS)}"
            raise SpecError(source, "kinds", f"{why}, got {brief(kind)}", (i + 1,))
    device = data.get("device", "cpu")
    if not isinstance(device, str) or DEVICE.fullmatch(device) is None:  # "meta" holds no data: no case would run
        raise SpecError(
            source, "device", f'expected a torch device such as "cpu", "cuda" or "cuda:1", got {brief(device)}'
        )
    seed = data.get("seed", 0)
    if type(seed) is not int or not 0 <= seed < 2**63:
        raise SpecError(source, "seed", f"expected a whole number from 0 to 2^63 − 1, got {brief(seed)}")
    cases = tuple(
        Case(i, _point(dict(zip(lists, values)))) for i, values in enumerate(itertools.product(*lists.values()))
    )
    for case in cases:
        _check_point(case.point, lists, source)
    for kind, part in variants.keyword_gradients().items():  # a case without the keyword: nothing to differentiate
        if kind in kinds and not all(case.point.get(part.grid_key) for case in cases):
            needs = f"every case needs them ({part.grid_key} = [true] in [grid])"
            why = f"{kind!r} is the gradient of {part.gradient_noun}: {needs}"
            raise SpecError(source, "kinds", why, (kinds.index(kind) + 1,))
    return Grid(
        source=source,
        seed=seed,
        rule=rule,
        rtol=numbers["rtol"],
        atol=numbers["atol"],
        max_ulp=numbers["max_ulp"],
        kinds=tuple(kinds),
        causal_align=_choice(data, "causal_align", ALIGNMENTS, "top-left", source),
        device=device,
        lists=lists,
        cases=cases,
    )


def _lists(table: dict[str, Any], source: str) -> dict[str, list[Any]]:
    """The [grid] lists in a fixed order, each entry checked; seqlen and head_dim as their two keys."""
    for key in table:
        if key not in GRID_KEYS:
            raise SpecError(source, f"grid.{key}", f"unknown key; [grid] has {', '.join(GRID_KEYS)}")
    for one, (first, second) in PAIRS.items():
        if one in table and (first in table or second in table):
            raise SpecError(source, f"grid.{one}", f"give {one}, or {first} and {second}, not both")
        if one not in table and (first in table) != (second in table):
            missing = second if first in table else first
            raise SpecError(source, f"grid.{missing}", f"missing: {first} and {second} go together")
    for key in ("heads", "dtype"):
        if key not in table:
            raise SpecError(source, f"grid.{key}", "missing: a list of at least one value")
    for one in PAIRS:
        if one not in table and PAIRS[one][0] not in table:
            raise SpecError(
                source, f"grid.{one}", f"missing: a list of at least one value (or {' and '.join(PAIRS[one])})"
            )
    for key, value in table.items():
        if value == []:
            raise SpecError(source, f"grid.{key}", "empty: give at least one value")
        if not isinstance(value, list):
            raise SpecError(source, f"grid.{key}", f"expected a list of at least one value, got {brief(value)}")
        made: list[Any] = []  # the values the cases take (a part's: 30 and 30.0 are one cap)
        for i, entry in enumerate(value):
            _check_entry(key, entry, source, i)
            made.append(SWEPT[key].grid_value(entry) if key in SWEPT else entry)
            if (at := made.index(made[i])) != i:
                said = "is already at [{}]" if value[at] == entry else "is the value at [{}] again"
                raise SpecError(source, f"grid.{key}", f"{brief(entry)} {said.format(at + 1)}", (i + 1,))
    lists: dict[str, list[Any]] = {"batch": table.get("batch", [1]), "heads": table["heads"]}
    if "kv_heads" in table:
        lists["kv_heads"] = table["kv_heads"]
    for one, pair in PAIRS.items():
        for key in (one,) if one in table else pair:
            lists[key] = table[key]
    lists["dtype"] = table["dtype"]
    lists["causal"] = table.get("causal", [False])
    for key in VARIANTS:
        if key in table:
            lists[key] = [SWEPT[key].grid_value(v) for v in table[key]]
    count = 1
    for value in lists.values():
        count *= len(value)
    if count > limits.SWEEP_CASES:
        raise LimitError(source, "grid", f"{count} cases; at most {limits.SWEEP_CASES} (the limit)")
    return lists


def _check_entry(key: str, entry: Any, source: str, i: int) -> None:
    where = (source, f"grid.{key}")
    if key in SIZES:
        if type(entry) is not int or not 1 <= entry <= SIZES[key]:
            raise SpecError(*where, f"expected a whole number from 1 to {SIZES[key]}, got {brief(entry)}", (i + 1,))
    elif key == "dtype" and entry not in DTYPES:
        raise SpecError(*where, f"expected one of {', '.join(DTYPES)}, got {brief(entry)}", (i + 1,))
    elif key == "causal" and type(entry) is not bool:
        raise SpecError(*where, f"expected true or false, got {brief(entry)}", (i + 1,))
    elif key in SWEPT and (why := SWEPT[key].grid_refusal(entry)) is not None:
        raise SpecError(*where, why, (i + 1,))


def _point(values: dict[str, Any]) -> dict[str, Any]:
    """A point with every shape key spelt out: kv_heads (heads where not given), seqlen_q and seqlen_k, head_dim_qk
    and head_dim_v; then dtype, causal and the variants the grid has."""
    point = {"batch": values["batch"], "heads": values["heads"], "kv_heads": values.get("kv_heads", values["heads"])}
    for one, (first, second) in PAIRS.items():
        point[first], point[second] = (values[one], values[one]) if one in values else (values[first], values[second])
    return point | {k: v for k, v in values.items() if k not in point and k not in PAIRS}


def _check_point(point: dict[str, Any], lists: dict[str, list[Any]], source: str) -> None:
    """What one point's values must hold together: kv_heads divides heads, batch × heads within the limit."""
    heads, kv = point["heads"], point["kv_heads"]
    if heads % kv:
        at = (lists["kv_heads"].index(kv) + 1,)
        raise SpecError(source, "grid.kv_heads", f"{kv} key/value heads do not divide {heads} heads", at)
    if point["batch"] * heads > limits.BATCH_HEADS:
        at = (lists["batch"].index(point["batch"]) + 1,)
        raise LimitError(
            source, "grid.batch", f"{point['batch']} batches × {heads} heads; at most {limits.BATCH_HEADS}", at
        )
    b, n, m, d, dv = (point[key] for key in ("batch", "seqlen_q", "seqlen_k", "head_dim_qk", "head_dim_v"))
    shapes = {"q": (b, heads, n, d), "k": (b, kv, m, d), "v": (b, kv, m, dv), "out": (b, heads, n, dv)}
    for name, shape in shapes.items():  # the engine's limit on a tensor: refused here, before a kernel runs
        if math.prod(shape) > limits.TENSOR_ENTRIES:
            why = f"{name} of a case would be {shape}, {math.prod(shape)} entries; at most {limits.TENSOR_ENTRIES}"
            raise LimitError(source, "grid", why)


def _choice(data: dict[str, Any], key: str, choices: tuple[str, ...], default: str, source: str) -> str:
    value = data.get(key, default)
    if value not in choices:
        raise SpecError(source, key, f"expected one of {', '.join(map(repr, choices))}, got {brief(value)}")
    return value


def _whole_numbers(value: Any) -> Any:
    """A JSON grid's whole numbers as TOML's are, ints (read_table keeps every JSON number as its text);
    a longer one than any setting takes stays text, and is refused where it is read."""
    if isinstance(value, dict):
        return {key: _whole_numbers(x) for key, x in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(x) for x in value]
    if isinstance(value, FloatText) and len(value) <= 30 and value.lstrip("-").isdigit() and value.isascii():
        return int(value)
    return value


def _decimal(data: dict[str, Any], key: str, source: str) -> str | None:
    """rtol, atol or max_ulp as the decimal written, checked as the engine reads it."""
    if key not in data:
        return None
    value = data[key]
    text = str(value) if type(value) is int or (isinstance(value, str) and type(value) is not str) else None
    if text is None:
        raise SpecError(source, key, f"expected a number such as 1e-3, got {brief(value)}")
    try:
        parse_tolerance(text, key)
    except SpecError:
        raise SpecError(source, key, f"expected a number at least 0 such as 1e-3, got {text}") from None
    return text


__all__ = ["DTYPES", "KINDS", "VARIANTS", "Case", "Grid", "grid_of", "load_grid"]
