"""Where the tokens stand, one part: ``positions = [...]`` gives each query's position and ``key_positions`` each
key's (default 0, 1, …, n − 1), as a KV cache holds them: a decoding step is one new query at position p
against the cached keys at 0..p − 1 and its own key at p.

It makes no value of its own; the parts that count positions read them here (the shared hook): the causal
mask and a window compare positions (key position ≤ query position), the distance bias is −m·|p_i − p_j|
and the turn by position is p_i·θ for query i and p_j·θ for key j. Nothing in the core counts positions.
The derivation's step says which keys were cached (before the first query's position) and which are new.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from symattn.input.files import kind_of
from symattn.input.messages import said
from symattn.input.reader import brief, parse_index
from symattn.input.records import record
from symattn.variants.base import PLACE, Part, Where

# --- limits of positions ---------------------------------------------------------------------------
POSITION = 1_000_000  # the largest position (a million tokens of context)


# --- the setting and the step of a derivation ------------------------------------------------------


@record
class Placed:
    """Each query's and each key's position (0-based, as the parts that turn or bias by position count them)."""

    queries: tuple[int, ...]
    keys: tuple[int, ...]


@record
class Decoding:
    """The step that says where the tokens stand: the queries' positions, the keys', which keys are cached."""

    kind: ClassVar[str] = "positions"
    queries: tuple[int, ...]
    keys: tuple[int, ...]
    cached: tuple[int, ...]  # the keys (0-based) before the first query's position: computed earlier
    new: tuple[int, ...]  # the others
    focus: int  # the focus query (0-based)
    attended: tuple[int, ...]  # the keys the focus query may attend (0-based)


def read_positions(reader: Any, data: Mapping[str, Any], where: Where) -> Placed | None:
    """``positions`` (n_q whole numbers) and ``key_positions`` (n_k), each from 0 to POSITION; None without either."""
    if "positions" not in data and "key_positions" not in data:
        return None
    queries = _list(reader, data, "positions", where.n_q)
    keys = _list(reader, data, "key_positions", where.n_k)
    return Placed(queries, keys)


def _list(reader: Any, data: Mapping[str, Any], key: str, count: int) -> tuple[int, ...]:
    if key not in data:
        return tuple(range(count))
    raw = data[key]
    if not isinstance(raw, list):
        raise reader.error(key, said(key + "_list", count=count, got=kind_of(raw)))
    if len(raw) != count:
        raise reader.error(key, said(key + "_count", count=count, n=len(raw)))
    out = []
    for n, x in enumerate(raw, 1):
        p = parse_index(x)  # an int, or its digits as the web page sends them
        if p is None or not 0 <= p <= POSITION:
            raise reader.error(key, said("position_range", most=POSITION, got=brief(x)), (n,))
        out.append(p)
    return tuple(out)


def of(spec: Any) -> Placed:
    """The spec's positions (rows counted 0, 1, … where it gives none): what the other parts read."""
    given = spec.setting("positions")
    return given if given is not None else Placed(tuple(range(len(spec.Q))), tuple(range(len(spec.K))))


class Positions(Part):
    name = "positions"
    keys = ("positions", "key_positions")
    stage = PLACE
    title = "positions"
    web_fields = (
        {"key": "positions", "kind": "list", "default": "", "hint": "positions_hint"},
        {"key": "key_positions", "kind": "list", "default": "", "hint": "key_positions_hint"},
    )
    step_kinds = ("positions",)
    facts = (("toy_vs_real", "positions", None),)
    rounded_inputs = True
    float64_in_mask = True  # what it changes is in spec.allowed (and the parts that read it say so themselves)

    def read(self, reader: Any, data: Mapping[str, Any], where: Where) -> Placed | None:
        placed = read_positions(reader, data, where)
        self.check(reader, placed, where.symbolic)
        return placed

    def check(self, reader: Any, setting: Any, symbolic: bool) -> None:
        if setting is not None and symbolic:
            raise reader.error("positions", said("positions_symbols"))

    def report(self, spec: Any, setting: Placed | None) -> dict[str, Any]:
        return {} if setting is None else {"positions": list(setting.queries), "key_positions": list(setting.keys)}

    def toy(self, spec: Any, setting: Placed) -> tuple[tuple[str, Any], ...]:
        return (("positions", True),)

    def step(self, spec: Any, model: Any) -> Decoding | None:
        placed = spec.setting(self.name)
        if placed is None:
            return None
        first = min(placed.queries)
        cached = tuple(j for j, p in enumerate(placed.keys) if p < first)
        new = tuple(j for j in range(len(placed.keys)) if j not in cached)
        f = spec.focus
        attended = tuple(j for j in range(len(placed.keys)) if model.may_attend(f, j))
        return Decoding(placed.queries, placed.keys, cached, new, f, attended)


PART = Positions()

__all__ = ["PART", "POSITION", "Decoding", "Placed", "Positions", "of", "read_positions"]
